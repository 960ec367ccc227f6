"""A writer's lease: an exclusive OS file lock that the kernel drops when its holder dies."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from writerpool.atomic import ensure_private_dir
from writerpool.config.paths import WriterRecord
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.verdicts import advance

# Notices of a wait: the CLI prints them on stderr at once (cli/output.py), so a command
# that waits for a busy writer says for whom and how long before it answers writer_busy.
log = logging.getLogger(__name__)

POLL_SECONDS = 0.05
# A warm writer's holder (the pool service) yields it when an operator command asks:
# the request is a file beside the lease, and the command waits at least this long.
YIELD_WAIT_SECONDS = 10.0


class Lease:
    """One holder's lease. Its descriptor is the holder's token: a release frees this
    holder's lock and never another's, and the descriptor is taken and given back under
    a lock, so a session's stop and its connection watch may both release it."""

    def __init__(self, writer_dir: Path) -> None:
        self.path = WriterRecord(writer_dir).lease_file
        self._fd: int | None = None
        self._lock = threading.Lock()

    def acquire(self, wait: float, *, ask_warm: bool = False, judging: bool = False) -> None:
        """Take the lease, waiting at most `wait` seconds, else writer_busy. With
        `ask_warm` (an operator command), a warm writer's holder is asked to yield it and
        waited for at least YIELD_WAIT_SECONDS: warmth never makes a command busy. Unless
        the holder only judges the writer (`judging`: it changes nothing in the clone),
        the guard's recorded verdict stops being current (pool/writer/verdicts.py). Bounded by
        wait / POLL_SECONDS rounds."""
        start = time.monotonic()
        deadline = start + wait
        asked = told = False
        try:
            while not self.try_acquire(judging=judging):
                if ask_warm and not asked and ask_to_yield(self.path.parent):
                    asked = True
                    deadline = max(deadline, time.monotonic() + YIELD_WAIT_SECONDS)
                if not told and deadline > time.monotonic():
                    told = True
                    log.warning(waiting_for(self.path.parent, deadline - start))
                if time.monotonic() >= deadline:
                    raise self.busy()
                time.sleep(POLL_SECONDS)
        finally:
            if asked:
                withdraw_yield(self.path.parent)

    def mark_warm(self, warm: bool = True) -> None:
        """Say in the lease file whether its holder keeps the writer warm (and so yields
        it when asked) or has given it to a session."""
        with self._lock:
            if self._fd is not None:
                _record_holder(self._fd, warm=warm)

    def try_acquire(self, *, judging: bool = False) -> bool:
        """Take the lease if it is free now; False when another holder has it."""
        with self._lock:
            if self._fd is not None:
                return True
            if not self._take():
                return False
        if not judging:
            advance(self.path.parent)
        return True

    def _take(self) -> bool:
        try:
            ensure_private_dir(self.path.parent.parent)  # the writers directory itself
            ensure_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise WriterpoolError(
                "writer_lease_unavailable", "the writer's lease file cannot be opened"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        _record_holder(fd)
        return True

    def busy(self) -> WriterpoolError:
        """writer_busy, naming the holder when it left its name."""
        holder = read_holder(self.path.parent)
        who = f" ({holder.describe()})" if holder else ""
        return WriterpoolError(
            "writer_busy", f"another process holds the writer{who}; retry after it ends"
        )

    def release(self) -> None:
        """Free the lease; a second call does nothing. The descriptor is taken out under
        the lock first: a second release never unlocks or closes a descriptor number
        that the first closed and the process has since given to another lease."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            _clear_holder(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def proven(self) -> bool:
        """Whether this holder's lock is on the writer's lease file as it is now (not
        on a file since removed or replaced, which another process could lock)."""
        with self._lock:
            if self._fd is None:
                return False
            try:
                mine, now = os.fstat(self._fd), os.stat(self.path, follow_symlinks=False)
            except OSError:
                return False
        return (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino)


HOLDER_LIMIT = 4096
LOCKS_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as its holder wrote it into the lease file (advisory only)."""

    pid: int
    command: str
    warm: bool = False  # a warm writer's holder, which yields it on request

    def describe(self) -> str:
        return f"pid {self.pid}: {self.command}"


def _command() -> str:
    """The holder's command line, short and without paths: `writerpool writer collect …`."""
    words = ["writerpool", *sys.argv[1:]]
    shown = " ".join(w for w in words if not w.startswith(("/", "~")))
    return "".join(c for c in shown if c.isprintable())[:160]


def _record_holder(fd: int, warm: bool = False) -> None:
    # Best effort: the lock is what excludes others; this only tells them who holds it.
    record: dict[str, object] = {"pid": os.getpid(), "command": _command()}
    if warm:
        record["warm"] = True
    data = json.dumps(record).encode()
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
        fd = os.open(
            WriterRecord(writer_dir).lease_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        )
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
    return Holder(pid=pid, command=clean, warm=record.get("warm") is True)


def holder_text(writer_dir: Path) -> str:
    """Who holds the writer's lease, as far as the lease file tells."""
    holder = read_holder(writer_dir)
    if holder is None:
        return "another process (the lease file names none)"
    kept = "kept warm by the pool service, asked to yield it, " if holder.warm else ""
    return f"{kept}{holder.describe()}"


def waiting_for(writer_dir: Path, seconds: float) -> str:
    return (
        f"writer {writer_dir.name} is held by {holder_text(writer_dir)}; waiting up to "
        f"{_seconds(seconds)} for it ([pool] lease_wait_seconds), then writer_busy"
    )


def _seconds(seconds: float) -> str:
    return f"{round(seconds, 1):g} s"


def ask_to_yield(writer_dir: Path) -> bool:
    """Ask a warm writer's holder to yield it; False when the holder is no warm pool."""
    holder = read_holder(writer_dir)
    if holder is None or not holder.warm:
        return False
    try:
        fd = os.open(
            WriterRecord(writer_dir).yield_request, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600
        )
    except OSError:
        return False
    os.close(fd)
    return True


def yield_asked(writer_dir: Path) -> bool:
    return os.path.lexists(WriterRecord(writer_dir).yield_request)


def withdraw_yield(writer_dir: Path) -> None:
    with suppress(OSError):
        os.unlink(WriterRecord(writer_dir).yield_request)


def lease_taken(writer_dir: Path) -> bool:
    """Whether some process holds the writer's lease, asked without taking it (taking it,
    even for a moment, could turn a session start away). Read from /proc/locks, which
    lists every flock by device and inode; bounded by the host's lock count."""
    try:
        info = os.stat(WriterRecord(writer_dir).lease_file, follow_symlinks=False)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            table = locks.read(LOCKS_LIMIT)
    except OSError:
        return False
    key = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        if "FLOCK" in fields and "->" not in fields and key in fields:
            return True
    return False


@contextmanager
def leased(writer_dir: Path, wait: float) -> Iterator[Lease]:
    """An operator command's lease (a warm writer is asked to yield)."""
    lease = Lease(writer_dir)
    lease.acquire(wait, ask_warm=True)
    try:
        yield lease
    finally:
        lease.release()


class LeaseBatch:
    """The leases of many writers, taken with one wait: every lease is tried in each
    round until all are held or the one deadline passes, so a command touching N busy
    writers waits `wait` seconds once, not N times. Held leases stay with the batch
    until release_all(); a writer that stayed busy is refused by take() at once."""

    def __init__(self, dir_of: Callable[[str], Path], names: Iterable[str]) -> None:
        self._dir_of = dir_of
        self._leases = {name: Lease(dir_of(name)) for name in names}
        self._failed: dict[str, WriterpoolError] = {}

    def acquire(self, wait: float, *, yield_wait: float = YIELD_WAIT_SECONDS) -> None:
        """Bounded by len(writers) tries per round and wait / POLL_SECONDS rounds; once a
        warm holder is asked to yield, the wait lasts at least `yield_wait` seconds."""
        start = time.monotonic()
        deadline = start + wait
        asked: set[str] = set()
        told = False
        while True:
            waiting = 0
            for name, lease in self._leases.items():
                if name in self._failed:
                    continue
                try:
                    if lease.try_acquire():
                        if name in asked:
                            withdraw_yield(lease.path.parent)
                            asked.discard(name)
                        continue
                    waiting += 1
                except WriterpoolError as exc:  # its lease file cannot be opened
                    self._failed[name] = exc
                    continue
                if name not in asked and ask_to_yield(lease.path.parent):
                    asked.add(name)
                    deadline = max(deadline, time.monotonic() + yield_wait)
            if not waiting or time.monotonic() >= deadline:
                for name in asked:  # the writers still held by someone else
                    withdraw_yield(self._leases[name].path.parent)
                return
            if not told:
                told = True
                log.warning(self._waiting_for(deadline - start))
            time.sleep(POLL_SECONDS)

    def _waiting_for(self, seconds: float) -> str:
        names = [name for name in self.busy() if name not in self._failed]
        held = "; ".join(f"{name} by {holder_text(self._dir_of(name))}" for name in names[:8])
        more = f"; and {len(names) - 8} more" if len(names) > 8 else ""
        return (
            f"{len(names)} writer(s) held ({held}{more}); waiting up to {_seconds(seconds)} "
            "for them once ([pool] lease_wait_seconds), then writer_busy for each still held"
        )

    def take(self, name: str) -> Lease:
        """The writer's held lease (the batch releases it), or why it is not held."""
        lease = self._leases.get(name)
        if lease is None:  # not named when the batch was made: taken now or refused
            lease = self._leases[name] = Lease(self._dir_of(name))
        if name in self._failed:
            raise self._failed[name]
        if not lease.try_acquire():
            raise lease.busy()
        return lease

    def busy(self) -> list[str]:
        return sorted(name for name, lease in self._leases.items() if not lease.held)

    def release_all(self) -> None:
        for lease in self._leases.values():
            lease.release()


@contextmanager
def leased_all(
    dir_of: Callable[[str], Path], names: Iterable[str], wait: float,
    *, yield_wait: float = YIELD_WAIT_SECONDS,
) -> Iterator[LeaseBatch]:  # fmt: skip
    batch = LeaseBatch(dir_of, names)
    try:
        batch.acquire(wait, yield_wait=yield_wait)
        yield batch
    finally:
        batch.release_all()
