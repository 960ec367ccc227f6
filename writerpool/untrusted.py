"""Reading documents writerpool does not fully control: bounded in size and depth.

Configuration, modes and writer state are read only from regular files (never a FIFO,
a device or a directory), opened without blocking, and never more than a size limit.
Their JSON and TOML are parsed with a bounded nesting depth, so a hostile file ends in
a refusal rather than a RecursionError, a hang or the whole machine's memory.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_DEPTH = 64


class DocumentRefused(Exception):
    """The file or text is not an acceptable document; `reason` is path-free."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_regular(path: Path, *, limit: int = MAX_DOCUMENT_BYTES, follow: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes.

    Raises FileNotFoundError when nothing is there, OSError when it cannot be opened,
    DocumentRefused when it is a symlink (unless `follow`), not a regular file, or too
    large. O_NONBLOCK makes opening a FIFO return at once instead of waiting for a writer.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: O_NOFOLLOW met a symlink
            raise DocumentRefused("is a symbolic link") from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentRefused("is not a regular file")
        if info.st_size > limit:
            raise DocumentRefused(f"is larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(65536, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while we read
                raise DocumentRefused(f"is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_depth(value: object, max_depth: int = MAX_DEPTH) -> None:
    """Raise DocumentRefused when lists and objects nest deeper than max_depth."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise DocumentRefused(f"nests deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def loads_json(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON; ValueError when invalid, DocumentRefused when nested too deeply."""
    try:
        value = json.loads(raw)
    except RecursionError as exc:
        raise DocumentRefused(f"nests deeper than {max_depth} levels") from exc
    check_depth(value, max_depth)
    return value


def loads_toml(text: str, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Parse TOML; tomllib.TOMLDecodeError when invalid, DocumentRefused when too deep."""
    try:
        value = tomllib.loads(text)
    except RecursionError as exc:
        raise DocumentRefused(f"nests deeper than {max_depth} levels") from exc
    check_depth(value, max_depth)
    return value
