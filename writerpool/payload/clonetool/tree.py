"""The work tree as it is on disk, walked without recursion and without trusting git.

git's view of a clone leaves things out: ignored files, special files, empty
directories, anything below a directory named `.git`, nested repositories. The walk
sees every entry below /work (except the clone's own `.git`), with lstat only: file
contents are never read here, so a sparse 3 GiB file costs nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

from .gitrun import WORK

TOO_LONG = 4000  # bytes: longer paths are beyond what git and the kernel handle


@dataclass
class Disk:
    files: dict[bytes, int] = field(default_factory=dict)  # regular files and links -> size
    dirs: set[bytes] = field(default_factory=set)
    special: list[bytes] = field(default_factory=list)  # FIFOs, sockets, devices
    unreadable: list[bytes] = field(default_factory=list)  # cannot be listed or read
    nested: list[bytes] = field(default_factory=list)  # directories holding a `.git`
    dot_git: list[bytes] = field(default_factory=list)  # `.git` entries git cannot hold


def _nested_repo(full: bytes, entry: os.DirEntry[bytes]) -> bool:
    """A `.git` that makes its directory another repository or a linked worktree."""
    try:
        if entry.is_file(follow_symlinks=False):
            return True  # a gitdir pointer: a linked worktree or a submodule
        if entry.is_dir(follow_symlinks=False):
            return os.path.lexists(os.path.join(full, b"HEAD"))
    except OSError:
        return False
    return False


def _classify(disk: Disk, rel: bytes, entry: os.DirEntry[bytes], pending: list[bytes]) -> None:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        disk.unreadable.append(rel)
        return
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        pending.append(rel)
    elif stat.S_ISREG(mode):
        disk.files[rel] = st.st_size
        if not os.access(entry.path, os.R_OK):
            disk.unreadable.append(rel)
    elif stat.S_ISLNK(mode):
        disk.files[rel] = st.st_size
    else:
        disk.special.append(rel)


def walk() -> Disk:
    disk = Disk()
    top = WORK.encode()
    pending: list[bytes] = [b""]
    while pending:
        rel = pending.pop()
        full = os.path.join(top, rel) if rel else top
        if len(full) > TOO_LONG:
            disk.unreadable.append(rel)
            continue
        try:
            entries = list(os.scandir(full))
        except OSError:
            disk.unreadable.append(rel)
            continue
        if rel:
            disk.dirs.add(rel)
            dot = next((e for e in entries if e.name == b".git"), None)
            if dot is not None and _nested_repo(dot.path, dot):
                disk.nested.append(rel)
                continue
        for entry in entries:
            path = os.path.join(rel, entry.name) if rel else entry.name
            if entry.name == b".git":
                if rel:
                    disk.dot_git.append(path)
                continue  # the clone's own git directory is judged elsewhere
            _classify(disk, path, entry, pending)
    return disk


def under(path: bytes, tops: list[bytes] | set[bytes]) -> bool:
    """Whether `path` is one of `tops` or below one of them."""
    while path:
        if path in tops:
            return True
        path = os.path.dirname(path)
    return False


def parents(paths: Iterable[bytes]) -> set[bytes]:
    """Every directory that holds one of `paths`."""
    found: set[bytes] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent and parent not in found:
            found.add(parent)
            parent = os.path.dirname(parent)
    return found
