"""The clone's `.git` as the controller's clone check reads it (gitops/verify.py).

The controller never reads the clone itself: it sends the paths its check looks at
(kinds, directory listings, file contents), and this answers them following no link:
a linked or special parent, a file that is not plain or is too large, a directory that
is not plain or holds too many entries is answered as `unsafe` with words the
controller replays (gitops/git_snapshot.py).
"""

from __future__ import annotations

import base64
import os
import stat
from typing import Any

from .gitrun import GIT_DIR

MAX_ENTRIES = 10_000  # names one listing answers; past it the listing is refused
MAX_PROBES = 100  # paths one request may ask about


class _Unsafe(Exception):
    pass


def _top(rel: str) -> str:
    return "a ref file" if rel.startswith("refs/") else rel


def _kind(path: str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else "special file"


def _parent(git_dir: str, rel: str) -> str | None:
    """The parent directory of `rel`, every component a plain directory; None when one
    is missing."""
    parts = rel.split("/")
    path = git_dir
    for part in parts[:-1]:
        path = os.path.join(path, part)
        found = _kind(path)
        if found == "missing":
            return None
        if found != "directory":
            raise _Unsafe(f"{parts[0]} cannot be opened as a plain directory")
    return path


def _kind_of(git_dir: str, rel: str) -> str:
    parent = _parent(git_dir, rel)
    return (
        "missing"
        if parent is None
        else _kind(os.path.join(parent, rel.rsplit("/", maxsplit=1)[-1]))
    )


def _entries(git_dir: str, rel: str) -> list[list[str]]:
    found = "directory" if rel == "." else _kind_of(git_dir, rel)
    if found == "missing":
        return []
    if found != "directory":
        raise _Unsafe(f"{_top(rel)} is not a plain directory")
    top = os.path.normpath(os.path.join(git_dir, rel))
    names: list[str] = []
    with os.scandir(top) as listing:
        for entry in listing:
            names.append(entry.name)
            if len(names) > MAX_ENTRIES:
                raise _Unsafe(f"{_top(rel)} holds too many entries")
    return [[name, _kind(os.path.join(top, name))] for name in sorted(names)]


def _read(git_dir: str, rel: str, limit: int) -> str | None:
    found = _kind_of(git_dir, rel)
    if found == "missing":
        return None
    if found != "file":
        raise _Unsafe(f"{_top(rel)} is not a plain file")
    path = os.path.join(git_dir, rel)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > limit:
            raise _Unsafe(f"{_top(rel)} is too large")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise _Unsafe(f"{_top(rel)} is too large")
    return base64.b64encode(data).decode()


def _answer(call: Any, git_dir: str, rel: str, *args: Any) -> Any:
    try:
        return {"value": call(git_dir, rel, *args)}
    except _Unsafe as exc:
        return {"unsafe": str(exc)}
    except OSError:
        return {"unsafe": f"{_top(rel)} cannot be read"}


def snapshot(probe: dict[str, Any], git_dir: str = GIT_DIR) -> dict[str, Any]:
    """Answers to `probe` ({"kinds": [rel], "entries": [rel], "reads": {rel: limit}})."""
    kinds, entries = list(probe.get("kinds", [])), list(probe.get("entries", []))
    reads = dict(probe.get("reads", {}))
    if len(kinds) + len(entries) + len(reads) > MAX_PROBES:
        raise ValueError("too many paths asked about")
    top = _kind(git_dir)
    if top != "directory":
        why = f".git is a {top}, not a directory"
        if not os.path.isdir(os.path.dirname(git_dir)):
            why = "the clone directory cannot be opened"
        return {"top": why, "kinds": {}, "entries": {}, "reads": {}}
    return {
        "top": None,
        "kinds": {rel: _answer(_kind_of, git_dir, rel) for rel in kinds},
        "entries": {rel: _answer(_entries, git_dir, rel) for rel in entries},
        "reads": {rel: _answer(_read, git_dir, rel, int(limit)) for rel, limit in reads.items()},
    }
