"""The processes of this machine as /proc shows them, for tests that look for one.

A process just started shows an empty command line until the kernel has finished its
exec, well after the parent's spawn returned (measured: right after
`subprocess.Popen` returns, 95 % of fresh Python children still had none, idle or
loaded). A scan that matched on the command line then missed the process, so these
helpers read such a process again until its command line is there."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PF_KTHREAD = 0x00200000
SETTLE_SECONDS = 30.0  # the longest a process may take to finish its exec on a loaded host
# Older than this, a process without a command line has it empty for good (no exec is
# that slow): it is taken as read, and never waited for.
FRESH_SECONDS = 10.0


@dataclass(frozen=True)
class Running:
    pid: int
    parent: int
    group: int
    owner: int
    argv: tuple[bytes, ...]
    age: float  # seconds since it started


def _read(pid: int) -> Running | None:
    """The process now; its argv is empty while it is inside exec (or holds one empty
    string, as Linux shows a process started with no arguments). None: gone, a zombie
    or a kernel thread (neither will ever have a command line)."""
    entry = Path(f"/proc/{pid}")
    try:
        owner = entry.stat().st_uid
        fields = (entry / "stat").read_bytes().rpartition(b")")[2].split()
        cmdline = (entry / "cmdline").read_bytes()
    except OSError:
        return None
    if fields[0] in (b"Z", b"X") or int(fields[6]) & PF_KTHREAD:
        return None
    argv = tuple(cmdline.split(b"\0")[:-1]) if cmdline else ()
    age = _uptime() - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return Running(pid, int(fields[1]), int(fields[2]), owner, argv, age)


def _uptime() -> float:
    with open("/proc/uptime", "rb") as uptime:
        return float(uptime.read().split()[0])


def _in_exec(process: Running) -> bool:
    """Whether the process is this account's, started moments ago, without a command
    line yet: the kernel has not finished its exec."""
    return not any(process.argv) and process.owner == os.getuid() and process.age < FRESH_SECONDS


def running(deadline_seconds: float = SETTLE_SECONDS) -> list[Running]:
    """Every live process of this machine with its command line. This account's
    processes still inside exec (started moments ago, no command line yet) are read
    again until they have one (at the deadline they are taken as they are); another
    account's are taken as read."""
    found: list[Running] = []
    settling: list[Running] = []
    # Newest first (the highest numbers, mostly): a process just started is read at once.
    pids = sorted((int(name) for name in os.listdir("/proc") if name.isdigit()), reverse=True)
    for pid in pids:  # bounded by the processes of this machine
        if (process := _read(pid)) is not None:
            (settling if _in_exec(process) else found).append(process)
    deadline = time.monotonic() + deadline_seconds
    while settling and time.monotonic() < deadline:  # each leaves once its exec is done
        time.sleep(0.01)
        again = [p for p in (_read(s.pid) for s in settling) if p is not None]
        found += [p for p in again if not _in_exec(p)]
        settling = [p for p in again if _in_exec(p)]
    return found + settling


def mine(deadline_seconds: float = SETTLE_SECONDS) -> list[Running]:
    """This account's live processes with their command lines."""
    return [p for p in running(deadline_seconds) if p.owner == os.getuid()]
