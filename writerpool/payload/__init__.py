"""Code that runs INSIDE a writer's containers, carried by the writer image
(runtime/image_tools.py copies these files in at build): `clonetool`, run by the
throwaway containers that read, review, provision or reset a clone, and the acceptance
`harness` package (carried as one zip archive). Standard library only, and nothing of
writerpool is imported: it runs on the image's Python, against whatever the agent left
in the clone.

No host module imports it (an import-linter contract in pyproject.toml says so): the host
names these files as paths (runtime/image_tools.py), and what both sides must agree on
is written on each side and checked by tests/unit/test_payload_agreement.py (the wire
constants, and the tree removal the host keeps an identical copy of in
writerpool/tree_removal.py).
"""
