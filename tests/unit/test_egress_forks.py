"""The egress fork server (egress.forks) with nothing of a session: its children are
not the host's, are watched and killed through their pidfds, and everything ends
quietly when the host closes its ends (a word on a closed pipe would print a broken
pipe on the operator's terminal)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from writerpool import proc
from writerpool.egress.forks import Forked, ForkServer
from writerpool.errors import WriterpoolError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def forks() -> Iterator[ForkServer]:
    server = ForkServer(proc.clean_env({"PYTHONPATH": str(ROOT)}))
    try:
        yield server
    finally:
        server.close()


def _end(child: Forked) -> None:
    child.kill()
    assert child.wait(30)
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()
    child.release()


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_child_whose_stdin_ends_before_a_spec_and_its_server_end_quietly(
    forks: ForkServer, capfd: pytest.CaptureFixture[str]
) -> None:
    child = forks.fork()
    assert _parent(child.pid) == forks.pid and not child.ended()
    assert child.stdin is not None and child.stdout is not None
    child.stdin.close()
    assert child.wait(30)
    assert child.stdout.read() == b""
    _end(child)
    forks.close()
    assert forks.running() is False
    assert capfd.readouterr().err == ""


def test_children_are_killed_through_their_pidfds_and_the_server_goes_on(
    forks: ForkServer,
) -> None:
    first, second = forks.fork(), forks.fork()
    assert first.pid != second.pid
    _end(first)
    assert first.ended(), "a released child is no longer watched"
    assert not second.ended()
    third = forks.fork()
    assert _parent(third.pid) == forks.pid
    _end(second)
    _end(third)


def test_a_fork_server_that_answers_late_is_given_up_and_ends_quietly(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A late answer must never be taken for the next request's (its pid and pidfd name
    another child), and the fork server, finding its host gone, says nothing."""
    server = ForkServer(proc.clean_env({"PYTHONPATH": str(ROOT)}))
    try:
        _end(server.fork())  # started and answering; from now on an answer is late at 1 s
        server._socket.settimeout(1.0)
        os.kill(server.pid, signal.SIGSTOP)
        with pytest.raises(WriterpoolError) as late:
            server.fork()
        assert late.value.code == "egress_failed" and server.broken
        os.kill(server.pid, signal.SIGCONT)
        with pytest.raises(WriterpoolError):
            server.fork()  # never asked again
    finally:
        os.kill(server.pid, signal.SIGCONT)
        server.close()
    assert server.running() is False
    assert capfd.readouterr().err == ""
