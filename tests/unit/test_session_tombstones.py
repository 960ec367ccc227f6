"""Closed sessions stay answerable as tombstones, up to a bound per owner: a client that
closes many sessions never makes another client's closed sessions go."""

from __future__ import annotations

from pathlib import Path

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


def test_each_owner_keeps_its_newest_closed_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manager_module, "MAX_TOMBSTONES", 3)
    config = parse_config(CONFIG.encode())
    sessions = SessionManager(Paths.from_env(), LoadedConfig(config, "f"), ExecutionModes())
    plan = plan_session(config, ExecutionModes(), "demo", None, None)
    # The other client's two closed sessions first, then five of the busy one's.
    order = [("other", 0), ("other", 1), *[("busy", n) for n in range(5)]]
    for owner, n in order:
        sid = f"s-{owner}-{n}"
        closed = Session(sid, plan, None, "2026-01-01T00:00:00Z", owner=owner,
                         closed_at="2026-01-01T00:00:01Z")  # fmt: skip
        sessions._sessions[sid] = closed
    sessions.close("s-busy-4")  # a close (here of a closed one) forgets what is past the bound

    def kept(owner: str) -> list[str]:
        return [s["sessionId"] for s in sessions.list(owner)["sessions"]]

    assert kept("other") == ["s-other-0", "s-other-1"]
    assert kept("busy") == ["s-busy-2", "s-busy-3", "s-busy-4"]
