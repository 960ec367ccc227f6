"""Code that runs inside a writer's containers, shipped in the writer image
(runtime/image_tools.py): standard library only, it imports nothing of writerpool.

Host code imports from it only what both sides must agree on: the one removal of
agent-made trees (`clonetool.removal`, which the local host's storage removal uses too)
and a few names of the tools' protocol (request variables, mount places, chunk sizes).
"""
