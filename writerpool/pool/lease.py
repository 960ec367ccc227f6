"""A writer's lease: an exclusive OS file lock that the kernel drops when its holder dies."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.pool.verdicts import advance
from writerpool.state.atomic import ensure_private_dir


class Lease:
    def __init__(self, writer_dir: Path) -> None:
        self.path = writer_dir / "lease"
        self._fd: int | None = None

    def acquire(self, wait: float, *, judging: bool = False) -> None:
        """Take the lease, waiting at most `wait` seconds, else writer_busy. Unless the
        holder only judges the writer (`judging`: it changes nothing in the clone), the
        guard's recorded verdict stops being current (pool/verdicts.py)."""
        try:
            ensure_private_dir(self.path.parent.parent)  # the writers directory itself
            ensure_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise WriterpoolError(
                "writer_lease_unavailable", "the writer's lease file cannot be opened"
            ) from exc
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    holder = read_holder(self.path.parent)
                    who = f" ({holder.describe()})" if holder else ""
                    raise WriterpoolError(
                        "writer_busy", f"another process holds the writer{who}; retry after it ends"
                    ) from None
                time.sleep(0.05)
                continue
            self._fd = fd
            _record_holder(fd)
            if not judging:
                advance(self.path.parent)
            return

    def release(self) -> None:
        if self._fd is not None:
            _clear_holder(self._fd)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


HOLDER_LIMIT = 4096


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as its holder wrote it into the lease file (advisory only)."""

    pid: int
    command: str

    def describe(self) -> str:
        return f"pid {self.pid}: {self.command}"


def _command() -> str:
    """The holder's command line, short and without paths: `writerpool writer collect …`."""
    words = ["writerpool", *sys.argv[1:]]
    shown = " ".join(w for w in words if not w.startswith(("/", "~")))
    return "".join(c for c in shown if c.isprintable())[:160]


def _record_holder(fd: int) -> None:
    # Best effort: the lock is what excludes others; this only tells them who holds it.
    data = json.dumps({"pid": os.getpid(), "command": _command()}).encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass


def _clear_holder(fd: int) -> None:
    with suppress(OSError):
        os.ftruncate(fd, 0)


def read_holder(writer_dir: Path) -> Holder | None:
    """The holder a busy lease names, or None (free, unnamed, or an unreadable file)."""
    try:
        fd = os.open(writer_dir / "lease", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = os.read(fd, HOLDER_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        record = json.loads(data)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    pid, command = record.get("pid"), record.get("command")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(command, str):
        return None
    clean = "".join(c for c in command if c.isprintable())[:160]
    return Holder(pid=pid, command=clean)


@contextmanager
def leased(writer_dir: Path, wait: float) -> Iterator[Lease]:
    lease = Lease(writer_dir)
    lease.acquire(wait)
    try:
        yield lease
    finally:
        lease.release()
