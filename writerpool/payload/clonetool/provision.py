"""`provision`: the writer's clone made in its storage (mounted read-write at /work)
from a base bundle streamed on stdin; the request (JSON) is in the environment
(REQUEST_VAR), so stdin is the bundle alone and the controller streams it from its file
(`reset` receives its bundle the same way).

The storage is emptied first, so a provisioning killed midway is simply redone. git
runs with the tool's own settings (gitrun.SAFE_CONFIG, no template: no hooks); the
clone's refs are reported for the controller to compare with the base it sent.
"""

from __future__ import annotations

import json
import os
from typing import IO, Any

from .gitrun import GIT_DIR, HEX, WORK, ToolError, git, git_env
from .removal import empty_dir, remove_path
from .storage import clear

MAX_REQUEST = 64 * 1024
REQUEST_VAR = "WRITERPOOL_REQUEST"
BUNDLE = os.path.join(GIT_DIR, "provision.bundle")
CHUNK = 1024 * 1024


def read_request(text: str | None) -> dict[str, Any]:
    if not text or len(text) > MAX_REQUEST:
        raise ToolError("the request is missing or too long")
    request = json.loads(text)
    if not isinstance(request, dict):
        raise ToolError("the request is not an object")
    return request


def receive(stream: IO[bytes], path: str, max_bytes: int) -> int:
    """Copy the rest of stdin into `path`; its size. Bounded by max_bytes."""
    size = 0
    with open(path, "xb") as out:
        for chunk in iter(lambda: stream.read(CHUNK), b""):  # bounded by max_bytes below
            size += len(chunk)
            if size > max_bytes:
                raise ToolError("the bundle is larger than announced")
            out.write(chunk)
    return size


def header_ok(path: str) -> bool:
    """A base bundle has no prerequisites: its history is complete."""
    with open(path, "rb") as handle:
        for number, line in enumerate(iter(handle.readline, b"")):
            if line == b"\n" or (number == 0 and not line.startswith(b"# v")):
                return True
            if line.startswith(b"-"):
                return False
    return True


def _refs(env: dict[str, str]) -> dict[str, str]:
    listed = git(["for-each-ref", "--format=%(objectname) %(refname)"], env)
    refs = {}
    for line in listed.split(b"\n"):  # bounded by the bundle's refs
        oid, _, ref = line.partition(b" ")
        if HEX.fullmatch(oid):
            refs[ref.decode()] = oid.decode()
    return refs


def provision(stream: IO[bytes]) -> dict[str, Any]:
    request = read_request(os.environ.get(REQUEST_VAR))
    branch, commit, fmt = request["branch"], request["commit"], request["object_format"]
    if fmt not in ("sha1", "sha256") or not isinstance(branch, str) or branch.startswith("-"):
        raise ToolError("the request names no usable branch or object format")
    empty_dir(WORK)  # a provisioning killed midway left a part: start again
    clear()  # a recreate's agent directory and cache
    env = git_env()
    git(["init", "-q", "--template=", f"--object-format={fmt}", f"--initial-branch={branch}"],
        env)  # fmt: skip
    size = receive(stream, BUNDLE, int(request["max_bytes"]))
    if not header_ok(BUNDLE):
        raise ToolError("a base bundle has no prerequisites")
    listed = git(["bundle", "unbundle", BUNDLE], env)
    refs = [
        (ref, oid)
        for oid, _, ref in (line.partition(" ") for line in listed.decode().splitlines())
        if ref.startswith(("refs/heads/", "refs/tags/"))
    ]
    if f"refs/heads/{branch}" not in {ref for ref, _ in refs}:
        raise ToolError("the base bundle lacks its branch")
    git(["update-ref", "--stdin"], env, data="".join(f"create {r} {o}\n" for r, o in refs).encode())
    git(["pack-refs", "--all"], env)  # packed, as `git clone` leaves them
    git(["checkout", "-q", "-f"], env)
    if request.get("origin"):  # the controller decided the URL is safe to copy
        git(["remote", "add", "--", "origin", str(request["origin"])], env)
    # A commit-graph lets later history walks stop at the base (collecting one commit
    # costs the same in a long history).
    git(["commit-graph", "write", "--reachable"], env)
    for rel in ("provision.bundle", "logs"):  # reflogs are not part of a baseline
        remove_path(os.path.join(GIT_DIR, rel))
    os.makedirs(os.path.join(GIT_DIR, "hooks"), exist_ok=True)  # mounted read-only later
    got = git(["rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"], env).decode().strip()
    if got != commit:
        raise ToolError("the base bundle holds another commit")
    return {"head": f"refs/heads/{branch}", "commit": got, "refs": _refs(env), "size": size}
