"""The session core's pure parts: placement, turn views, audit, scratch (the tool
contract's argument checks: test_tool_contract.py)."""

from __future__ import annotations

import json
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from writerpool.agent.events import TEXT_CAP, cap_text
from writerpool.audit import audit
from writerpool.config.models import Config, parse_config
from writerpool.config.modes import ContainerSettings, ExecutionModes, ModeEntry
from writerpool.config.paths import Paths
from writerpool.errors import CODES, WriterpoolError
from writerpool.sessions.placement import plan_session, workspace_capabilities
from writerpool.sessions.scratch import ScratchRoot, sweep
from writerpool.sessions.turns import turn_view

SID = "s-0123456789abcdef"


# -- placement -------------------------------------------------------------------------

CONFIG = """
[workspaces]
demo = "/srv/demo"
[profiles.review]
permission = "read-only"
provider = "p"
model = "m"
default = true
[profiles.code]
permission = "coding"
provider = "p"
model = "m"
[profiles.other]
permission = "coding"
provider = "p"
model = "m"
"""


def _modes(entry: ModeEntry | None) -> ExecutionModes:
    return ExecutionModes(workspaces={"demo": entry} if entry else {})


CONTAINER = ModeEntry(
    mode="container", container=ContainerSettings(profiles=("code",), writers=3, base="main")
)


@pytest.fixture
def config() -> Config:
    return parse_config(CONFIG.encode())


@pytest.mark.parametrize(
    ("entry", "profile", "placement"),
    [
        # Read-only sessions are contained in every mode, host mode included.
        (None, None, "readonly_container"),
        (None, "code", "host"),
        (ModeEntry(mode="host", accept_host_writes=True), "code", "host"),
        (ModeEntry(mode="host", accept_host_writes=True), None, "readonly_container"),
        (ModeEntry(mode="read-only"), None, "readonly_container"),
        (CONTAINER, None, "readonly_container"),
        (CONTAINER, "code", "container"),
    ],
)
def test_placement_follows_the_mode_table(
    config: Config, entry: ModeEntry | None, profile: str | None, placement: str
) -> None:
    plan = plan_session(config, _modes(entry), "demo", profile, None)
    assert plan.placement == placement
    assert plan.read_only == (profile is None)
    assert plan.profile_name == (profile or "review")


@pytest.mark.parametrize(
    ("entry", "profile", "base", "code"),
    [
        (ModeEntry(mode="read-only"), "code", None, "coding_refused"),
        (CONTAINER, "other", None, "coding_refused"),
        (None, "code", "main", "base_not_applicable"),
        (CONTAINER, None, "main", "base_not_applicable"),
        (ModeEntry(mode="host", accept_host_writes=True), "code", "main", "base_not_applicable"),
        (None, "ghost", None, "profile_unknown"),
    ],
)
def test_placement_refusals(
    config: Config, entry: ModeEntry | None, profile: str, base: str | None, code: str
) -> None:
    with pytest.raises(WriterpoolError) as info:
        plan_session(config, _modes(entry), "demo", profile, base)
    assert info.value.code == code


def test_container_coding_keeps_the_requested_base(config: Config) -> None:
    assert plan_session(config, _modes(CONTAINER), "demo", "code", "fix-1").base == "fix-1"
    with pytest.raises(WriterpoolError) as info:
        plan_session(config, _modes(None), "elsewhere", None, None)
    assert info.value.code == "workspace_unknown"


def test_capabilities_name_modes_and_writers_but_no_paths(config: Config) -> None:
    caps = workspace_capabilities(config, _modes(CONTAINER))
    assert caps == [
        {"alias": "demo", "mode": "container", "writers": 3, "warm": 0, "warmHosts": {},
         "defaultBase": "main",
         "containerProfiles": ["code"],
         "placement": {"coding": "container", "readOnly": "readonly_container"}},
    ]  # fmt: skip
    assert workspace_capabilities(config, _modes(None)) == [
        {"alias": "demo", "mode": "unset",
         "placement": {"coding": "host", "readOnly": "readonly_container"}},
    ]  # fmt: skip
    assert "/srv" not in json.dumps(caps)


# -- turn views ------------------------------------------------------------------------


@dataclass(frozen=True)
class Snap:
    status: str
    text: str | None
    stop_reason: str | None
    started_at: float = 1_700_000_000.0
    updated_at: float = 1_700_000_001.0
    ended_at: float | None = None
    text_truncated: bool = False
    error: str | None = None


def test_only_completed_turns_show_text() -> None:
    done = turn_view("t-1", Snap("completed", "answer", "stop", ended_at=1_700_000_002.0))
    assert done["text"] == "answer"
    assert done["startedAt"] == "2023-11-14T22:13:20.000Z"
    for status in ("running", "failed", "aborted"):
        view = turn_view("t-2", Snap(status, "partial tool output /etc/passwd", "error"))
        assert view["text"] is None
        assert view["status"] == status


def test_unknown_stop_reasons_and_statuses_are_not_passed_through() -> None:
    view = turn_view("t-1", Snap("exploded", None, "provider said: key sk-abc is invalid"))
    assert view["status"] == "failed"
    assert view["stopReason"] is None


def test_text_is_capped_at_64_kib_on_a_character_boundary() -> None:
    text = "é" * TEXT_CAP  # two bytes each
    capped, truncated = cap_text(text)
    assert truncated
    assert len(capped.encode()) <= TEXT_CAP
    assert capped == "é" * (TEXT_CAP // 2)
    view = turn_view("t-1", Snap("completed", text, "stop"))
    assert view["textTruncated"] is True
    assert cap_text("short") == ("short", False)


# -- audit -----------------------------------------------------------------------------


def _paths(tmp_path: Path) -> Paths:
    return Paths(
        config_file=tmp_path / "config.toml",
        state_dir=tmp_path / "state",
        cache_dir=tmp_path / "cache",
    )


def test_audit_appends_one_private_line_per_event_from_many_threads(tmp_path: Path) -> None:
    paths = _paths(tmp_path)

    def work(n: int) -> None:
        for i in range(25):
            audit(paths, tool_or_command="pi_session_get", outcome="ok", session=f"s-{n}{i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = paths.audit_log.read_text().splitlines()
    assert len(lines) == 100
    records = [json.loads(line) for line in lines]
    assert {r["action"] for r in records} == {"pi_session_get"}
    assert set(records[0]) == {"time", "action", "session", "writer", "outcome", "uid", "pid"}
    assert stat.S_IMODE(os.stat(paths.audit_log).st_mode) == 0o600


def test_audit_refuses_field_values_that_could_carry_paths_or_text(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    audit(paths, tool_or_command="writer collect", outcome="ok", writer="/home/me/x")
    audit(paths, tool_or_command="x\n{}", outcome="writer_busy", session="a prompt: do it")
    text = paths.audit_log.read_text()
    assert "/home" not in text and "prompt" not in text
    first, second = (json.loads(line) for line in text.splitlines())
    assert first["writer"] == "<refused>" and first["action"] == "writer collect"
    assert second["action"] == "<refused>" and second["outcome"] == "writer_busy"
    assert "writer_busy" in CODES


# -- scratch ---------------------------------------------------------------------------


def test_scratch_of_a_gone_server_is_swept_and_a_live_one_is_kept(tmp_path: Path) -> None:
    parent = tmp_path / "sessions"
    live = ScratchRoot(parent)
    (live.session_dir("s-1") / "agent").mkdir()
    # A server killed outright: its lock file exists but nobody holds it.
    dead = parent / "deadbeefdeadbeef"
    (dead / "s-2" / "agent").mkdir(parents=True)
    (dead / "s-2" / "agent" / "auth.json").write_text("{}")
    lock = parent / "deadbeefdeadbeef.lock"
    lock.write_text("")
    assert sweep(parent, keep="none") == 1
    assert not dead.exists() and not lock.exists()
    assert (live.root / "s-1" / "agent").is_dir()
    live.close()
    assert not live.root.exists()
    assert list(parent.iterdir()) == []
