"""Closed sessions stay answerable as tombstones, a bounded number of them: past the
bound the owner holding the most loses its earliest closed first, so a client that
closes many sessions loses its own, never another client's below an even share."""

from __future__ import annotations

import pytest

from writerpool.config.models import LoadedConfig, parse_config
from writerpool.config.modes import ExecutionModes
from writerpool.config.paths import Paths
from writerpool.sessions import manager as manager_module
from writerpool.sessions.manager import SessionManager
from writerpool.sessions.placement import plan_session
from writerpool.sessions.session import Session

CONFIG = """
[workspaces]
demo = "/srv/demo"
[profiles.review]
permission = "read-only"
provider = "p"
model = "m"
default = true
"""


class World:
    def __init__(self) -> None:
        config = parse_config(CONFIG.encode())
        self.sessions = SessionManager(Paths.from_env(), LoadedConfig(config, "f"),
                                       ExecutionModes())  # fmt: skip
        self.plan = plan_session(config, ExecutionModes(), "demo", None, None)

    def add(self, owner: str, n: int, closed: bool = True) -> str:
        """A session of `owner` (closed: a tombstone), as a start leaves it."""
        sid = f"s-{owner}-{n}"
        session = Session(sid, self.plan, None, "2026-01-01T00:00:00Z", owner=owner,
                          closed_at="2026-01-01T00:00:01Z" if closed else None)  # fmt: skip
        self.sessions._sessions[sid] = session
        return sid

    def kept(self, owner: str) -> list[str]:
        return [s["sessionId"] for s in self.sessions.list(owner)["sessions"]]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setattr(manager_module, "MAX_TOMBSTONES", 6)
    return World()


def test_a_client_closing_many_loses_its_own_first_and_the_bound_holds(world: World) -> None:
    for n in range(2):
        world.add("other", n)
    for n in range(8):
        world.add("busy", n)
    world.sessions.close("s-busy-7")  # a close (here of a closed one) forgets past the bound
    assert world.kept("other") == ["s-other-0", "s-other-1"]
    assert world.kept("busy") == ["s-busy-4", "s-busy-5", "s-busy-6", "s-busy-7"]


def test_no_owner_is_pushed_below_an_even_share(world: World) -> None:
    for n in range(2):
        world.add("other", n)
    for n in range(9):
        world.add("busy", n)
        world.sessions.close(f"s-busy-{n}")
    for n in range(2, 5):
        world.add("other", n)
        world.sessions.close(f"s-other-{n}")
    # Six kept: three each, each owner's latest.
    assert world.kept("other") == ["s-other-2", "s-other-3", "s-other-4"]
    assert world.kept("busy") == ["s-busy-6", "s-busy-7", "s-busy-8"]


def test_the_closed_sessions_of_clients_that_are_gone_are_forgotten(world: World) -> None:
    # Each `serve` relay is a client of its own, gone once it ended.
    for owner in ("relay-1", "relay-2", "alive"):
        for n in range(2):
            world.add(owner, n)
    world.add("relay-2", 2, closed=False)  # its sweep closes it first (orphans.py)
    world.sessions.forget_gone({"alive"})
    assert (world.kept("relay-1"), world.kept("relay-2")) == ([], ["s-relay-2-2"])
    assert world.kept("alive") == ["s-alive-0", "s-alive-1"]


def test_sessions_are_forgotten_in_the_order_they_closed_not_started(world: World) -> None:
    long_lived = world.add("busy", 0, closed=False)  # started first, still open
    for n in range(1, 7):
        world.add("busy", n)
    world.sessions.close(long_lived)  # closed last: the newest tombstone, kept
    assert world.kept("busy") == ["s-busy-2", "s-busy-3", "s-busy-4", "s-busy-5", "s-busy-6",
                                  long_lived]  # fmt: skip
