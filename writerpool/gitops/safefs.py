"""Reading a writer's `.git` directory without following anything the agent planted.

An agent can replace files below `.git` (refs, objects) with symbolic links to host
paths or with FIFOs. Every path here is opened component by component relative to a
directory descriptor with O_NOFOLLOW, files are opened non-blocking and checked to be
regular, and reads are bounded.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from types import TracebackType

DEFAULT_LIMIT = 4 * 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Kind(Enum):
    MISSING = "missing"
    FILE = "file"
    DIR = "directory"
    SYMLINK = "symbolic link"
    OTHER = "special file"


class UnsafePathError(Exception):
    """A path below `.git` is a link, a special file, too large, or unreadable."""


class TooLargeError(UnsafePathError):
    """A file or directory below `.git` holds more than the reader takes."""


def _top(rel: str) -> str:
    """How to name `rel` in a message: ref paths carry names an agent chose."""
    return "a ref file" if rel.startswith("refs/") else rel


def kind_at(dir_fd: int, name: str) -> Kind:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return Kind.MISSING
    if stat.S_ISLNK(st.st_mode):
        return Kind.SYMLINK
    if stat.S_ISDIR(st.st_mode):
        return Kind.DIR
    if stat.S_ISREG(st.st_mode):
        return Kind.FILE
    return Kind.OTHER


class GitDir:
    """An open `.git` directory; use as a context manager."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls, clone: Path) -> GitDir:
        """Open `<clone>/.git`, which must be a real directory (not a link or file)."""
        try:
            top = os.open(clone, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise UnsafePathError("the clone directory cannot be opened") from exc
        try:
            found = kind_at(top, ".git")
            if found is not Kind.DIR:
                raise UnsafePathError(f".git is a {found.value}, not a directory")
            return cls(os.open(".git", _DIR_FLAGS, dir_fd=top))
        finally:
            os.close(top)

    def __enter__(self) -> GitDir:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        os.close(self._fd)

    def _open_parent(self, rel: str) -> tuple[int, str]:
        """A descriptor of rel's parent directory (caller closes it) and rel's last name."""
        parts = rel.split("/")
        fd = os.dup(self._fd)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError):
                raise
            raise UnsafePathError(f"{parts[0]} cannot be opened as a plain directory") from exc
        return fd, parts[-1]

    def kind(self, rel: str) -> Kind:
        """What `rel` is, without following links; a linked parent is an error."""
        try:
            fd, name = self._open_parent(rel)
        except FileNotFoundError:
            return Kind.MISSING
        try:
            return kind_at(fd, name)
        finally:
            os.close(fd)

    def read(self, rel: str, limit: int = DEFAULT_LIMIT) -> bytes | None:
        """The bytes of regular file `rel`, None when missing; UnsafePathError otherwise."""
        try:
            parent, name = self._open_parent(rel)
        except FileNotFoundError:
            return None
        try:
            try:
                fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise UnsafePathError(f"{_top(rel)} is not a plain file") from exc
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePathError(f"{_top(rel)} is not a plain file")
            if st.st_size > limit:
                raise TooLargeError(f"{_top(rel)} is too large")  # nothing read
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise TooLargeError(f"{_top(rel)} is too large")
        return data

    def entries(self, rel: str, limit: int = 1_000_000) -> list[tuple[str, Kind]]:
        """Names and kinds in directory `rel` (empty when missing); more than `limit`
        entries is a TooLargeError, raised before the rest are listed."""
        try:
            parent, name = self._open_parent(rel)
        except FileNotFoundError:
            return []
        try:
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise UnsafePathError(f"{_top(rel)} is not a plain directory") from exc
        finally:
            os.close(parent)
        try:
            names = []
            with os.scandir(fd) as listing:
                for entry in listing:
                    names.append(entry.name)
                    if len(names) > limit:
                        raise TooLargeError(f"{_top(rel)} holds too many entries")
            return [(n, kind_at(fd, n)) for n in sorted(names)]
        finally:
            os.close(fd)

    def walk_files(self, rel: str, max_entries: int = 200_000) -> Iterator[str]:
        """Every regular file below directory `rel`, as paths relative to `.git`.

        A link or special file anywhere below is an UnsafePathError.
        """
        pending = [rel]
        seen = 0
        while pending:
            current = pending.pop()
            for name, kind in self.entries(current, max_entries - seen):
                seen += 1
                if seen > max_entries:
                    raise TooLargeError(f"{rel} holds too many entries")
                path = f"{current}/{name}"
                if kind is Kind.DIR:
                    pending.append(path)
                elif kind is Kind.FILE:
                    yield path
                elif kind is not Kind.MISSING:
                    raise UnsafePathError(f"{rel} holds a {kind.value}")
