"""The bounded MCP handshake against real processes: the real `writerpool serve`, and
small stand-in servers that break the contract in one way each."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.writers_support import config_text
from writerpool.clients.model import server_command
from writerpool.mcp.handshake import EXPECTED_TOOLS, handshake, server_env

# A line-oriented JSON-RPC server; TOOLS and BODY are filled in per test.
STAND_IN = textwrap.dedent(
    """\
    import json, sys
    TOOLS = {tools!r}
    BODY = {body!r}
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method = msg["method"]
        if method == "initialize":
            result = {{"protocolVersion": msg["params"]["protocolVersion"], "capabilities":
                      {{"tools": {{}}}}, "serverInfo": {{"name": "stand-in", "version": "0"}}}}
        elif method == "tools/list":
            result = {{"tools": [{{"name": n, "inputSchema": {{"type": "object"}}}}
                                 for n in TOOLS]}}
        else:
            result = {{"content": [{{"type": "text", "text": json.dumps(BODY)}}],
                      "structuredContent": BODY, "isError": not BODY.get("ok")}}
        print(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], "result": result}}), flush=True)
    """
)


def stand_in(tmp_path: Path, tools: list[str], body: dict[str, object]) -> list[str]:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN.format(tools=tools, body=body))
    return [sys.executable, str(script)]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    path = tmp_path / "wp" / "config.toml"
    path.parent.mkdir()
    path.write_text(config_text({"demo": checkout}))
    return path


def test_real_server_completes_the_handshake(config: Path) -> None:
    result = handshake(server_command(), server_env({"WRITERPOOL_CONFIG": str(config)}), 60)
    assert result.code == "mcp_verified", result.message
    assert sorted(result.tools) == sorted(EXPECTED_TOOLS)
    assert result.capabilities["ok"] is True
    assert [w["alias"] for w in result.capabilities["workspaces"]] == ["demo"]


def test_server_without_configuration_fails_with_the_loading_code(tmp_path: Path) -> None:
    env = server_env({"WRITERPOOL_CONFIG": str(tmp_path / "absent" / "config.toml")})
    result = handshake(server_command(), env, 60)
    assert result.code == "mcp_failed"
    assert "config_missing" in result.message
    assert str(tmp_path) not in result.message


def test_server_that_dies_at_start_fails_and_says_why(tmp_path: Path) -> None:
    command = [sys.executable, "-c", f"import sys; sys.exit('cannot read {tmp_path}/x')"]
    result = handshake(command, server_env(), 30)
    assert result.code == "mcp_failed"
    assert "cannot read" in result.message and str(tmp_path) not in result.message


def test_missing_executable_fails(tmp_path: Path) -> None:
    result = handshake([str(tmp_path / "no-such-server")], server_env(), 30)
    assert result.code == "mcp_failed" and "could not be started" in result.message


def test_silent_server_times_out() -> None:
    result = handshake([sys.executable, "-c", "import time; time.sleep(60)"], server_env(), 1)
    assert result.code == "mcp_timeout"


def test_non_protocol_output_fails_before_the_deadline() -> None:
    command = [sys.executable, "-c", "print('hello', flush=True); import time; time.sleep(60)"]
    result = handshake(command, server_env(), 50)
    assert result.code == "mcp_failed"
    assert "other than protocol frames" in result.message


def test_wrong_tool_list_is_unsupported(tmp_path: Path) -> None:
    seven = sorted(EXPECTED_TOOLS)[:-1]
    for tools in (seven, [*sorted(EXPECTED_TOOLS), "pi_extra"]):
        result = handshake(stand_in(tmp_path, tools, {"ok": True}), server_env(), 30)
        assert result.code == "mcp_unsupported", result.message


def test_capabilities_contract_is_checked(tmp_path: Path) -> None:
    tools = sorted(EXPECTED_TOOLS)
    good = handshake(stand_in(tmp_path, tools, {"ok": True}), server_env(), 30)
    assert good.code == "mcp_verified"
    unsure = handshake(stand_in(tmp_path, tools, {"status": "fine"}), server_env(), 30)
    assert unsure.code == "mcp_unsupported"
    refused = {"ok": False, "error": {"code": "config_invalid", "message": "x"}}
    failed = handshake(stand_in(tmp_path, tools, refused), server_env(), 30)
    assert failed.code == "mcp_failed" and "config_invalid" in failed.message
