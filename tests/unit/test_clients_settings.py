"""Codex's entry settings, paged turn text, the session's work and the annotations:
pure code, fed made-up files and snapshots."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from writerpool.clients.codex_config import (
    read_settings,
    settings_problems,
    wanted_settings,
    write_settings,
)
from writerpool.errors import WriterpoolError
from writerpool.sessions.contract.arguments import TEXT_PAGE_DEFAULT
from writerpool.sessions.contract.tools import TOOLS_BY_NAME, annotations_for
from writerpool.sessions.turns import progress_line, turn_view
from writerpool.sessions.work import changed_branches

WANTED = wanted_settings(["MY_KEY", "SSL_CERT_FILE"])
OWN = """# the operator's notes
model = "gpt-5"   # a comment kept

[mcp_servers.writerpool]
command = "/usr/bin/python3"
args = ["-m", "writerpool", "serve"]

[mcp_servers.writerpool.env]
WRITERPOOL_CONFIG = "/srv/wp/config.toml"

[mcp_servers.other]
command = "/bin/echo"
"""


def test_settings_are_written_into_the_entry_and_nothing_else_changes(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(OWN)
    path.chmod(0o640)
    write_settings(path, WANTED)
    text = path.read_text()
    # Only added lines: every line of the operator's file is still there, in order.
    kept = [line for line in text.splitlines() if line in OWN.splitlines()]
    assert kept == OWN.splitlines()
    assert path.stat().st_mode & 0o777 == 0o640
    document = tomllib.loads(text)
    assert document["mcp_servers"]["other"] == {"command": "/bin/echo"}
    assert read_settings(path) == WANTED
    assert settings_problems(read_settings(path), WANTED) == []


def test_prompt_approval_is_written_only_when_chosen_and_other_approvals_stay(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(OWN + '\n[mcp_servers.writerpool.tools.pi_session_close]\nx = "kept"\n')
    approved = wanted_settings(["MY_KEY"], approve_prompts=True)
    assert "tools" not in WANTED
    write_settings(path, WANTED)
    assert settings_problems(read_settings(path), WANTED) == []
    assert settings_problems(read_settings(path), approved) == [
        "pi_session_prompt is not approved (approval_mode)"
    ]
    write_settings(path, approved)
    tools = tomllib.loads(path.read_text())["mcp_servers"]["writerpool"]["tools"]
    assert tools == {
        "pi_session_prompt": {"approval_mode": "approve"},
        "pi_session_close": {"x": "kept"},
    }
    assert settings_problems(read_settings(path), approved) == []


def test_writing_without_an_entry_fails_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "x"\n')
    with pytest.raises(WriterpoolError) as info:
        write_settings(path, WANTED)
    assert info.value.code == "client_failed"
    assert path.read_text() == 'model = "x"\n'


def test_settings_problems_name_what_is_missing_and_accept_more() -> None:
    assert settings_problems({}, WANTED) == [
        "required is not true",
        "startup_timeout_sec is below 30",
        "tool_timeout_sec is below 180",
        "env_vars lacks MY_KEY, SSL_CERT_FILE",
    ]
    more = {**WANTED, "tool_timeout_sec": 600, "env_vars": [*WANTED["env_vars"], "EXTRA"]}
    assert settings_problems(more, WANTED) == []
    assert settings_problems({**WANTED, "required": False}, WANTED) == ["required is not true"]


@dataclass(frozen=True)
class Snap:
    status: str
    text: str | None
    stop_reason: str | None = "stop"
    started_at: float = 1_700_000_000.0
    updated_at: float = 1_700_000_001.0
    ended_at: float | None = 1_700_000_002.0
    tool_calls: int = 0
    text_truncated: bool = False
    error: str | None = None


def test_turn_text_comes_in_pages_with_the_whole_length() -> None:
    text = "".join(chr(0x3B1 + i % 20) for i in range(20_001))  # two UTF-8 bytes each
    first = turn_view("t-1", Snap("completed", text))
    assert first["text"] == text[:TEXT_PAGE_DEFAULT]
    assert (first["textLength"], first["nextOffset"], first["textTruncated"]) == (
        20_001, TEXT_PAGE_DEFAULT, False,
    )  # fmt: skip
    last = turn_view("t-1", Snap("completed", text), offset=16_000, limit=10_000)
    assert last["text"] == text[16_000:] and last["nextOffset"] is None
    beyond = turn_view("t-1", Snap("completed", text), offset=30_000)
    assert (beyond["text"], beyond["nextOffset"]) == ("", None)
    running = turn_view("t-2", Snap("running", "partial", None, ended_at=None))
    assert (running["text"], running["textLength"], running["nextOffset"]) == (None, None, None)


def test_progress_line_counts_tool_calls_and_seconds() -> None:
    snap = Snap("running", None, None, tool_calls=3)
    assert progress_line(snap, 1_700_000_041.5) == "turn running: 3 tool calls, 41 s"
    assert progress_line(Snap("running", None, tool_calls=1), 1_700_000_000.0) == (
        "turn running: 1 tool call, 0 s"
    )


def test_changed_branches_lists_created_moved_and_deleted() -> None:
    start = {"main": "a" * 40, "old": "b" * 40, "same": "c" * 40}
    now = {"main": "d" * 40, "new": "e" * 40, "same": "c" * 40}
    assert changed_branches(start, now) == [
        {"name": "main", "commit": "d" * 40},
        {"name": "new", "commit": "e" * 40},
        {"name": "old", "commit": None},
    ]


def test_only_a_prompt_with_host_coding_is_destructive() -> None:
    for spec in TOOLS_BY_NAME.values():
        assert annotations_for(spec, host_coding=False).destructive is False, spec.name
    prompt = TOOLS_BY_NAME["pi_session_prompt"]
    assert annotations_for(prompt, host_coding=True).destructive is True
    assert annotations_for(TOOLS_BY_NAME["pi_session_close"], True).destructive is False
    assert prompt.hints.open_world is True
