"""A writer's lease: an exclusive OS file lock that the kernel drops when its holder dies."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.state.atomic import ensure_private_dir


class Lease:
    def __init__(self, writer_dir: Path) -> None:
        self.path = writer_dir / "lease"
        self._fd: int | None = None

    def acquire(self, wait: float) -> None:
        """Take the lease, waiting at most `wait` seconds, else writer_busy."""
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
                    raise WriterpoolError(
                        "writer_busy", "another process holds the writer; retry after it ends"
                    ) from None
                time.sleep(0.05)
                continue
            self._fd = fd
            return

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


@contextmanager
def leased(writer_dir: Path, wait: float) -> Iterator[Lease]:
    lease = Lease(writer_dir)
    lease.acquire(wait)
    try:
        yield lease
    finally:
        lease.release()
