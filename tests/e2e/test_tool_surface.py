"""The tool surface through a real MCP client session: snapshot, capabilities, refusals.

None of these start pi: every call here is answered before an agent would launch.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio

from tests.e2e.conftest import MakeServer
from tests.e2e.harness import Client, connect

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools.json"
UPDATE_ENV = "WRITERPOOL_UPDATE_SNAPSHOTS"
SID = "s-0123456789abcdef"


async def _tools(client: Client) -> list[dict[str, Any]]:
    listed = await client.session.list_tools()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]


def test_tools_list_matches_the_golden_snapshot(make_server: MakeServer) -> None:
    server = make_server()

    async def scenario() -> list[dict[str, Any]]:
        async with connect(server) as client:
            return await _tools(client)

    tools = anyio.run(scenario)
    rendered = json.dumps(tools, indent=2, sort_keys=True) + "\n"
    if os.environ.get(UPDATE_ENV) == "1":
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(rendered)
    assert rendered == SNAPSHOT.read_text(), (
        f"tools/list drifted from {SNAPSHOT.name}; review, then regenerate with {UPDATE_ENV}=1"
    )
    names = [t["name"] for t in tools]
    assert names == [
        "pi_capabilities_get", "pi_session_start", "pi_session_list", "pi_session_get",
        "pi_session_prompt", "pi_turn_get", "pi_session_abort", "pi_session_close",
    ]  # fmt: skip
    for tool in tools:
        assert tool["inputSchema"]["additionalProperties"] is False
        hints = tool["annotations"]
        assert {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints)
    by_name = {t["name"]: t["annotations"] for t in tools}
    assert by_name["pi_session_prompt"]["openWorldHint"] is True
    assert by_name["pi_session_close"]["idempotentHint"] is True
    assert all(by_name[n]["readOnlyHint"] for n in ("pi_session_list", "pi_turn_get"))


def test_capabilities_report_modes_writers_and_profiles_without_paths(
    make_server: MakeServer,
) -> None:
    server = make_server()

    async def scenario() -> tuple[Client, dict[str, Any]]:
        async with connect(server) as client:
            return client, await client.ok("pi_capabilities_get")

    client, body = anyio.run(scenario)
    raw = server.paths.config_file.read_bytes()
    assert body["configFingerprint"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert body["reloadPolicy"] == "restart-required"
    assert body["version"]
    workspaces = {w["alias"]: w for w in body["workspaces"]}
    assert workspaces["demo"] == {
        "alias": "demo",
        "mode": "unset",
        "placement": {"coding": "host", "readOnly": "readonly_container"},
    }
    assert workspaces["hosted"]["mode"] == "host"
    assert workspaces["locked"]["mode"] == "read-only"
    assert workspaces["boxed"]["mode"] == "container"
    assert workspaces["boxed"]["writers"] == 2
    assert workspaces["boxed"]["defaultBase"] == "main"
    profiles = {p["alias"]: p for p in body["profiles"]}
    assert profiles["review"] == {
        "alias": "review", "permission": "read-only", "default": True, "agent": "pi"
    }  # fmt: skip
    assert profiles["code"]["permission"] == "coding"
    client.assert_clean(server.secrets)


REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"workspace": "locked", "executionProfile": "code"}, "coding_refused"),
    ({"workspace": "hosted", "base": "main"}, "base_not_applicable"),
    ({"workspace": "hosted", "executionProfile": "code", "base": "main"}, "base_not_applicable"),
    ({"workspace": "demo", "executionProfile": "code", "base": "main"}, "base_not_applicable"),
    ({"workspace": "boxed", "base": "main"}, "base_not_applicable"),
    ({"workspace": "nowhere"}, "workspace_unknown"),
    ({"workspace": "demo", "executionProfile": "ghost"}, "profile_unknown"),
]


def test_refusals_carry_stable_codes_and_start_nothing(make_server: MakeServer) -> None:
    server = make_server()

    async def scenario() -> Client:
        async with connect(server) as client:
            for arguments, code in REFUSALS:
                assert await client.code("pi_session_start", arguments) == code, arguments
            listed = await client.ok("pi_session_list")
            assert listed["sessions"] == []
            return client

    client = anyio.run(scenario)
    client.assert_clean(server.secrets)
    assert [line["outcome"] for line in server.audit_lines()] == [code for _, code in REFUSALS] + [
        "ok"
    ]


# Arguments that break each tool's schema in a different way.
MALFORMED: dict[str, list[dict[str, Any]]] = {
    "pi_capabilities_get": [{"extra": 1}],
    "pi_session_list": [{"sessionId": SID}],
    "pi_session_start": [
        {},
        {"workspace": 7},
        {"workspace": "Bad Alias"},
        {"workspace": "-demo"},
        {"workspace": "demo", "executionProfile": ""},
        {"workspace": "demo", "base": "-evil"},
        {"workspace": "demo", "base": "x" * 201},
        {"workspace": "demo", "path": "/etc"},
    ],
    "pi_session_get": [{}, {"sessionId": "s-1"}, {"sessionId": SID + "\n"}, {"sessionId": None}],
    "pi_session_prompt": [
        {"sessionId": SID},
        {"sessionId": SID, "message": ""},
        {"sessionId": SID, "message": "x" * 65537},
        {"sessionId": SID, "message": ["a"]},
    ],
    "pi_turn_get": [
        {"sessionId": SID},
        {"sessionId": SID, "turnId": "t-0"},
        {"sessionId": SID, "turnId": "t-1", "waitSeconds": 61},
        {"sessionId": SID, "turnId": "t-1", "waitSeconds": -1},
        {"sessionId": SID, "turnId": "t-1", "waitSeconds": "5"},
        {"sessionId": SID, "turnId": "t-1", "waitSeconds": True},
    ],
    "pi_session_abort": [{}, {"sessionId": "../../etc"}],
    "pi_session_close": [{}, {"sessionId": SID, "force": True}],
}

UNKNOWN: list[tuple[str, dict[str, Any], str]] = [
    ("pi_session_get", {"sessionId": SID}, "session_unknown"),
    ("pi_session_prompt", {"sessionId": SID, "message": "hi"}, "session_unknown"),
    ("pi_turn_get", {"sessionId": SID, "turnId": "t-1"}, "session_unknown"),
    ("pi_session_abort", {"sessionId": SID}, "session_unknown"),
    ("pi_session_close", {"sessionId": SID}, "session_unknown"),
    ("pi_no_such_tool", {}, "tool_unknown"),
]


def test_malformed_and_unknown_inputs_get_schema_errors_or_stable_codes(
    make_server: MakeServer,
) -> None:
    server = make_server()
    secret_message = "do-not-echo-this-prompt-" + "q" * 65530

    async def scenario() -> Client:
        async with connect(server) as client:
            for tool, cases in MALFORMED.items():
                for arguments in cases:
                    assert await client.code(tool, arguments) == "input_invalid", (tool, arguments)
            for tool, arguments, code in UNKNOWN:
                assert await client.code(tool, arguments) == code, (tool, arguments)
            too_long = {"sessionId": SID, "message": secret_message}
            assert await client.code("pi_session_prompt", too_long) == "input_invalid"
            return client

    client = anyio.run(scenario)
    client.assert_clean([*server.secrets, "do-not-echo-this-prompt", "/etc"])
    calls = sum(len(c) for c in MALFORMED.values()) + len(UNKNOWN) + 1
    lines = server.audit_lines()
    assert len(lines) == calls
    assert {line["outcome"] for line in lines} == {
        "input_invalid", "session_unknown", "tool_unknown",
    }  # fmt: skip
    mode = stat.S_IMODE(os.stat(server.paths.audit_log).st_mode)
    assert mode == 0o600
    assert "do-not-echo" not in server.paths.audit_log.read_text()


def test_a_server_without_configuration_lists_its_tools_and_answers_with_the_code(
    make_server: MakeServer,
) -> None:
    server = make_server()
    server.paths.config_file.unlink()

    async def scenario() -> tuple[Client, int]:
        async with connect(server) as client:
            tools = await _tools(client)
            assert await client.code("pi_capabilities_get") == "config_missing"
            assert await client.code("pi_session_start", {"workspace": "demo"}) == "config_missing"
            # Argument checks still come first.
            assert await client.code("pi_session_start", {}) == "input_invalid"
            return client, len(tools)

    client, count = anyio.run(scenario)
    assert count == 8
    client.assert_clean(server.secrets)


def test_a_prompt_is_destructive_only_where_coding_runs_in_a_checkout(
    make_server: MakeServer,
) -> None:
    """The snapshot's configuration has host coding (hosted, and demo with no mode); a
    configuration whose coding runs only in writers marks the prompt non-destructive."""
    server = make_server()
    text = server.paths.config_file.read_text()
    head, _, rest = text.partition("\n\n")
    kept = [line for line in head.splitlines() if not line.startswith(("demo", "hosted"))]
    server.paths.config_file.write_text("\n".join(kept) + "\n\n" + rest)

    async def scenario() -> dict[str, dict[str, Any]]:
        async with connect(server) as client:
            return {t["name"]: t for t in await _tools(client)}

    tools = anyio.run(scenario)
    prompt = tools["pi_session_prompt"]["annotations"]
    assert (prompt["destructiveHint"], prompt["openWorldHint"]) == (False, True)
    assert not any(t["annotations"]["destructiveHint"] for t in tools.values())
    for tool in tools.values():
        assert tool["outputSchema"]["required"] == ["ok"]
