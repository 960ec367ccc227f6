"""Removing any tree an agent can make: no recursion, no path-length limit, links unfollowed.

Standard library only: the host (writer removal and recreation) imports this module as
well as the throwaway container. Directories are entered by descriptor relative to
their parent with O_NOFOLLOW and left through "..", so depth costs neither stack nor
descriptors (at most three are open) and no full path is ever formed; each directory is
given u+rwx first, so read-only or unreadable directories go too. Nothing else may
change the tree meanwhile (the caller holds the writer's lease, and the fence proved
that no container of the writer runs).
"""

from __future__ import annotations

import os
import stat

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _enter(parent_fd: int, name: str) -> int:
    mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    if mode & 0o700 != 0o700:
        # Linux has no lchmod; `name` was just seen to be a directory, not a link.
        os.chmod(name, stat.S_IMODE(mode) | 0o700, dir_fd=parent_fd)
    return os.open(name, _DIR, dir_fd=parent_fd)


def _clear(fd: int) -> str | None:
    """Unlink every non-directory in `fd`; the name of one subdirectory left, or None."""
    sub = None
    for name in os.listdir(fd):
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            sub = name
        else:
            os.unlink(name, dir_fd=fd)
    return sub


def remove_at(parent_fd: int, name: str) -> None:
    """Remove entry `name` of directory `parent_fd`, and everything below it."""
    try:
        mode = os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    below: list[str] = []  # the names from `name` down to the current directory
    cur = _enter(parent_fd, name)
    try:
        while True:
            sub = _clear(cur)
            if sub is not None:
                nxt = _enter(cur, sub)
                os.close(cur)
                cur = nxt
                below.append(sub)
                continue
            if not below:
                break
            up = os.open("..", _DIR, dir_fd=cur)
            os.close(cur)
            cur = up
            os.rmdir(below.pop(), dir_fd=cur)
    finally:
        os.close(cur)
    os.rmdir(name, dir_fd=parent_fd)


def remove_path(path: str | os.PathLike[str]) -> None:
    """Remove `path` (a file, link, special file or directory tree); missing is fine."""
    parent, name = os.path.split(os.path.abspath(os.fspath(path)))
    try:
        fd = os.open(parent, _DIR)
    except FileNotFoundError:
        return
    try:
        remove_at(fd, name)
    finally:
        os.close(fd)


def empty_dir(path: str | os.PathLike[str], keep: tuple[str, ...] = ()) -> None:
    """Remove everything inside directory `path` except the names in `keep`."""
    fd = os.open(os.fspath(path), _DIR)
    try:
        for name in os.listdir(fd):
            if name not in keep:
                remove_at(fd, name)
    finally:
        os.close(fd)
