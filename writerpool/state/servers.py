"""Which `writerpool serve` processes run alone, each serving its client from settings it
loaded once: such a server needs a restart to see a changed mode or configuration.

Each holds an exclusive lock on its own file, `<state dir>/servers/serve-<pid>.lock`,
for as long as it lives; the kernel drops the lock when the process dies, however it
dies, so a file whose lock can be taken is a leftover. The pool service and the relays
that `serve` becomes while it runs are not counted: the service re-reads the settings
when they change (docs/service.md, "Settings without restarts").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from writerpool.atomic import ensure_private_dir
from writerpool.config.paths import Paths

PREFIX = "serve-"
SUFFIX = ".lock"
# More files than any host runs servers; past it the rest are not looked at.
MAX_FILES = 4096


def servers_dir(paths: Paths) -> Path:
    return paths.state_dir / "servers"


@contextlib.contextmanager
def serving_alone(paths: Paths) -> Iterator[None]:
    """Mark this process as a server running alone until the block ends."""
    path = ensure_private_dir(servers_dir(paths)) / f"{PREFIX}{os.getpid()}{SUFFIX}"
    fd = _locked(path)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)


def _locked(path: Path) -> int:
    """The descriptor of `path`, locked; again when a counter removed it as a leftover
    between our open and our lock (bounded: a leftover is removed once)."""
    for _ in range(8):
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
    raise OSError(f"cannot hold {path.name}")


def count_alone(paths: Paths) -> int:
    """How many servers run alone now; leftovers of dead ones are removed."""
    try:
        names = sorted(os.listdir(servers_dir(paths)))[:MAX_FILES]
    except FileNotFoundError:
        return 0
    live = 0
    for name in names:  # bounded by MAX_FILES
        if name.startswith(PREFIX) and name.endswith(SUFFIX):
            live += _is_live(servers_dir(paths) / name)
    return live


def _is_live(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False  # gone meanwhile, or not a file of ours
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead server's leftover, held by us while removed
        return False
    finally:
        os.close(fd)
