"""Every writer session watches its host the same way: a host found unreachable releases
the writer once and fails the session's turn with the host's code; this machine's host
is never lost, so its sessions' turns keep their own words."""

from __future__ import annotations

import threading

import pytest

from tests.support.memhost import MemoryHost
from writerpool.agent.events import TurnSnapshot
from writerpool.runtime.local import LocalPodman
from writerpool.sessions import watch
from writerpool.sessions.watch import HOST_LOST_ERROR, HostWatch, WatchedAgent


class EndedAgent:
    """pi whose attachment ended: its one turn failed with pi's own exit."""

    alive = False

    def turn(self, turn_id: str) -> TurnSnapshot:
        return TurnSnapshot(turn_id, "failed", None, None, 0.0, 1.0, 1.0, error="agent_exited")


def test_a_turn_that_failed_says_the_host_was_lost_only_when_it_was() -> None:
    host = MemoryHost("th")
    agent = WatchedAgent(EndedAgent(), HostWatch(host, lambda: None))
    assert agent.turn("t1").error == "agent_exited"
    host.alive = False
    assert agent.turn("t1").error == HOST_LOST_ERROR
    here = WatchedAgent(EndedAgent(), HostWatch(LocalPodman(), lambda: None))
    assert here.turn("t1").error == "agent_exited"


def test_the_watch_releases_the_writer_once_when_its_host_is_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(watch, "WATCH_SECONDS", 0.01)
    host, released = MemoryHost("th"), threading.Event()
    calls: list[int] = []

    def release() -> None:
        calls.append(1)
        released.set()

    watching = HostWatch(host, release)
    watching.start()
    try:
        host.alive = False
        assert released.wait(30), "the lost host's writer was not released"
    finally:
        watching.stop()
    assert calls == [1] and watching.lost
