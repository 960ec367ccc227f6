"""Atomic file replacement: temp file in the same directory, fsync, rename (every state
file, the modes file and the service's records are written this way)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """Replace path with data so readers see the old or the new file, never a mix.
    `durable=False` skips both fsyncs: for what every session's start writes whole again
    (an agent directory's settings, and its token or, on an open network, its key),
    where a crash loses nothing the next start needs (which removes any credential left
    first), and each fsync costs a session's start milliseconds on a busy disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (a file renamed or linked into it) durable."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def ensure_private_dir(path: Path) -> Path:
    """Create path (and parents) and make the leaf 0700."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path
