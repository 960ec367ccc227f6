"""Private per-server scratch space for host sessions (agent directory, TMPDIR).

A host session's agent directory holds its provider credential. Close removes it;
a server that was killed cannot, so each server holds an exclusive lock on its own
scratch root and the next server to start deletes every root whose owner is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
from pathlib import Path

from writerpool.atomic import ensure_private_dir

log = logging.getLogger(__name__)


class ScratchRoot:
    """`<state>/sessions/<token>/`, owned by this process while `owner_fd` is locked."""

    def __init__(self, sessions_dir: Path) -> None:
        self._parent = ensure_private_dir(sessions_dir)
        token = secrets.token_hex(8)
        self._lock_path = self._parent / f"{token}.lock"
        # Locked under a name sweepers ignore, then renamed: no sweeper ever sees the
        # lock file of a live server unlocked.
        pending = self._parent / f".{token}.pending"
        self._fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(pending, self._lock_path)
        self.root = ensure_private_dir(self._parent / token)
        sweep(self._parent, keep=token)

    def session_dir(self, session_id: str) -> Path:
        return ensure_private_dir(self.root / session_id)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self._lock_path.unlink(missing_ok=True)
        os.close(self._fd)


def _owner_gone(lock_path: Path) -> bool:
    try:
        fd = os.open(lock_path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # locked: its server is alive
    finally:
        os.close(fd)
    return True


def sweep(parent: Path, keep: str) -> int:
    """Delete the scratch roots of servers that are gone; returns how many."""
    removed = 0
    for lock_path in parent.glob("*.lock"):
        token = lock_path.stem
        if token == keep or not _owner_gone(lock_path):
            continue
        shutil.rmtree(parent / token, ignore_errors=True)
        with contextlib.suppress(OSError):
            lock_path.unlink()
        removed += 1
    if removed:
        log.info("removed %d scratch directories of servers that were stopped", removed)
    return removed
