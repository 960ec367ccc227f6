"""The tool contract (writerpool/sessions/contract/): each tool's model publishes its schema
and refuses every bad argument with input_invalid before any handler runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.sessions.calls import ToolService
from writerpool.sessions.contract.arguments import TurnGet, input_schema
from writerpool.sessions.contract.tools import TOOLS, TOOLS_BY_NAME

SID = "s-0123456789abcdef"
SNAPSHOT = Path(__file__).resolve().parents[1] / "e2e" / "snapshots" / "tools.json"


def _message(tool: str, arguments: object) -> str:
    with pytest.raises(WriterpoolError) as info:
        TOOLS_BY_NAME[tool].parse(arguments)
    assert info.value.code == "input_invalid"
    return info.value.message


def test_every_published_schema_is_its_models_and_matches_the_snapshot() -> None:
    published = {t["name"]: t["inputSchema"] for t in json.loads(SNAPSHOT.read_text())}
    for tool in TOOLS:
        assert tool.input_schema() == input_schema(tool.arguments)
        assert tool.input_schema() == published[tool.name], tool.name
        assert tool.input_schema()["additionalProperties"] is False


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("pi_session_prompt", {"sessionId": SID}, "missing required argument: message"),
        ("pi_session_get", {"sessionId": 5}, "sessionId: must be a string"),
        (
            "pi_turn_get",
            {"sessionId": SID, "turnId": "t-1", "waitSeconds": "1"},
            "waitSeconds: must be a number",
        ),
        (
            "pi_turn_get",
            {"sessionId": SID, "turnId": "t-1", "waitSeconds": False},
            "waitSeconds: must be a number",
        ),
        (
            "pi_turn_get",
            {"sessionId": SID, "turnId": "t-1", "limit": 2.5},
            "limit: must be an integer",
        ),
        (
            "pi_turn_get",
            {"sessionId": SID, "turnId": "t-1", "waitSeconds": 60.5},
            "waitSeconds: above the maximum 60",
        ),
        (
            "pi_turn_get",
            {"sessionId": SID, "turnId": "t-1", "offset": -1},
            "offset: below the minimum 0",
        ),
        (
            "pi_turn_get",
            {"sessionId": SID, "turnId": "t-1", "waitSeconds": float("nan")},
            "waitSeconds: must be a finite number",
        ),
        (
            "pi_session_prompt",
            {"sessionId": SID, "message": ""},
            "message: shorter than 1 characters",
        ),
        (
            "pi_session_prompt",
            {"sessionId": SID, "message": "m" * 65537},
            "message: longer than 65536 characters",
        ),
        (
            "pi_session_get",
            {"sessionId": SID + "\n"},
            "sessionId: does not match the pattern ^s-[0-9a-f]{16}$",
        ),
        (
            "pi_session_start",
            {"workspace": "demo", "base": "--upload-pack=evil"},
            "base: does not match the pattern ^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$",
        ),
        ("pi_session_start", {"workspace": "demo", "base": None}, "base: must be a string"),
        (
            "pi_session_list",
            {"/home/me/secret path": 1, "force": 2},
            "unexpected argument(s): <name>, force",
        ),
        ("pi_session_get", [], "arguments must be an object"),
    ],
)
def test_each_kind_of_bad_argument_gets_its_stable_message(
    tool: str, arguments: object, message: str
) -> None:
    assert _message(tool, arguments) == message


def test_valid_arguments_become_the_model_and_none_means_empty() -> None:
    assert TOOLS_BY_NAME["pi_session_list"].parse(None) is not None
    args = TOOLS_BY_NAME["pi_turn_get"].parse(
        {"sessionId": SID, "turnId": "t-3", "waitSeconds": 2, "limit": 5.0}
    )
    assert isinstance(args, TurnGet)
    assert (args.session_id, args.turn_id, args.wait_seconds, args.offset, args.limit) == (
        SID, "t-3", 2.0, 0, 5,
    )  # fmt: skip
    assert _message("pi_session_prompt", {"sessionId": "nope", "message": "the secret plan"})
    assert "secret plan" not in _message("pi_session_prompt", {"sessionId": 1, "message": 2})


def test_a_refused_call_reaches_no_handler(tmp_path: Path, monkeypatch: Any) -> None:
    # No configuration at all: a call that passed the checks would answer config_missing.
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    service = ToolService(paths)
    reached: list[object] = []

    def handle(*args: object) -> dict[str, Any]:
        reached.append(args)
        return {}

    monkeypatch.setattr(service, "_handle", handle)
    monkeypatch.setattr(service, "_audit", lambda *a, **k: None)
    for tool, arguments in [
        ("pi_session_prompt", {"sessionId": SID}),
        ("pi_session_get", {"sessionId": SID, "x": 1}),
        ("pi_turn_get", {"sessionId": SID, "turnId": "t-1", "offset": "1"}),
    ]:
        body = anyio.run(service.call, tool, arguments)
        assert body["error"]["code"] == "input_invalid"
    assert reached == []
    anyio.run(service.call, "pi_session_list", {})  # a valid call does reach it
    assert len(reached) == 1
