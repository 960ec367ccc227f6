"""tests/support/procs.py finds a process whose command line is not there yet."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import procs

MARKER = b"writerpool-procs-support-marker"
# Stands in for an exec the kernel has not finished (no command line for a while,
# longer on a loaded host): a shell with no arguments at all, which waits, then execs
# the process the test looks for.
NO_ARGUMENTS = (
    "import ctypes; none = (ctypes.c_char_p * 1)(None); "
    "ctypes.CDLL(None).execve(b'/bin/sh', none, none)"
)


def test_a_process_without_its_command_line_yet_is_read_again_until_it_has_one() -> None:
    child = subprocess.Popen([sys.executable, "-c", NO_ARGUMENTS], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(b"echo waits; /bin/sleep 0.5; exec /usr/bin/python3 -c 'import sys; "
                          b"sys.stdin.read()' " + MARKER + b"\n")  # fmt: skip
        child.stdin.flush()
        assert child.stdout.readline() == b"waits\n"  # the shell runs, with no arguments
        found = [p for p in procs.mine() if p.parent == os.getpid() and p.pid == child.pid]
        assert [p.argv[-1] for p in found] == [MARKER]
    finally:
        child.stdin.close()
        child.wait()
        child.stdout.close()


def test_an_ended_child_not_yet_reaped_is_not_listed() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie now
    try:
        assert child.pid not in {p.pid for p in procs.mine()}
    finally:
        child.wait()
