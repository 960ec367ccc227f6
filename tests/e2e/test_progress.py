"""Progress notifications and failure log lines, through a real MCP client session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.e2e.conftest import CLIENT_TEXT, MakeServer
from tests.e2e.harness import connect

pytestmark = pytest.mark.pi


def test_a_waiting_turn_get_reports_progress_and_pages_the_answer(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    """A coding session on the host (no writer needed) on the script's ~12 s turn."""
    server = make_server(pi_prefix)
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect(server) as client:
            started = await client.ok(
                "pi_session_start", {"workspace": "hosted", "executionProfile": "code"}
            )
            sid = started["session"]["sessionId"]
            turn = await client.ok(
                "pi_session_prompt", {"sessionId": sid, "message": "client-commit please"}
            )
            args = {"sessionId": sid, "turnId": turn["turnId"], "waitSeconds": 60}
            while True:
                result = await client.session.call_tool(
                    "pi_turn_get", args, progress_callback=on_progress
                )
                body = result.structured_content or {}
                if body["turn"]["status"] != "running":
                    break
            page2 = await client.ok("pi_turn_get", {**args, "waitSeconds": 0,
                                                    "offset": 8000, "limit": 30000})  # fmt: skip
            await client.ok("pi_session_close", {"sessionId": sid})
            return dict(body), page2

    body, page2 = anyio.run(scenario)
    # Outside a git clone the git steps fail, but each of the three tool calls runs.
    turn = body["turn"]
    assert turn["status"] == "completed" and turn["toolCalls"] == 3
    assert turn["text"] == CLIENT_TEXT[:8000] and turn["nextOffset"] == 8000
    assert page2["turn"]["text"] == CLIENT_TEXT[8000:]
    assert page2["turn"]["nextOffset"] is None and page2["turn"]["textTruncated"] is False
    assert body["work"]["note"].startswith("This session works in the operator's checkout")
    messages = [m for _, m in seen if m]
    assert len(messages) >= 3, seen
    assert all(m.startswith("turn running: ") and m.endswith(" s") for m in messages)
    assert any("1 tool call," in m or " tool calls," in m for m in messages)
    values = [v for v, _ in seen]
    assert values == sorted(values), "progress only grows"


def test_a_failed_start_is_also_a_log_line(make_server: MakeServer, pi_prefix: Path) -> None:
    server = make_server(pi_prefix)
    lines: list[types.LoggingMessageNotificationParams] = []
    # The workspace directory vanishes: the host session cannot start.
    server.workspaces["demo"].rename(server.workspaces["demo"].with_name("gone"))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        lines.append(params)

    async def scenario() -> str:
        async with connect(server, logging_callback=on_log) as client:
            code = await client.code("pi_session_start", {"workspace": "demo"})
            await anyio.sleep(0.2)
            return code

    assert anyio.run(scenario) == "session_start_failed"
    assert [line.level for line in lines] == ["error"]
    data = lines[0].data
    assert data["event"] == "session_start_failed" and data["tool"] == "pi_session_start"
    assert str(server.root) not in json.dumps(data)
