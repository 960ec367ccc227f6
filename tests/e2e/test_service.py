"""The pool service over HTTP: only loopback, only with a client's token, sessions owned
by the client that started them, and a killed service leaves what a killed `serve` does."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.e2e.conftest import HELLO_TEXT, MakeServer
from tests.e2e.harness import assert_no_process_in, connect, files_holding
from tests.e2e.service_support import http_client, post, running_service, tool_call
from writerpool.mcp.http import MAX_BODY_BYTES
from writerpool.state import tokens
from writerpool.state.service_record import running

pytestmark = pytest.mark.pi

HOST_CODE = {"workspace": "hosted", "executionProfile": "code"}
HELLO_PROMPT = "say-hello: over http"


def _headers(port: int, token: str | None, **extra: str) -> dict[str, str]:
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}  # fmt: skip
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return {**headers, **extra}


def test_hostile_requests_are_refused_and_start_nothing(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    good = tokens.create(server.paths, "alpha")
    revoked = tokens.create(server.paths, "gone")
    tokens.revoke(server.paths, "gone")
    start = tool_call("pi_session_start", HOST_CODE)
    with running_service(server) as service:
        port = service.port
        refusals = {
            "no token": (post(port, start, _headers(port, None)), 401),
            "wrong token": (post(port, start, _headers(port, good + "x")), 401),
            "revoked token": (post(port, start, _headers(port, revoked)), 401),
            "not bearer": (post(port, start, _headers(port, None, Authorization=good)), 401),
            "foreign Origin": (
                post(port, start, _headers(port, good, Origin="http://evil.test")), 403),
            "Origin of a rebinding name": (
                post(port, start, _headers(port, good, Origin=f"http://rebind.test:{port}")), 403),
            "Host of a rebinding name": (
                post(port, start, _headers(port, good, Host=f"rebind.test:{port}")), 403),
            "body over the cap": (
                post(port, start + b" " * MAX_BODY_BYTES, _headers(port, good)), 413),
            "OAuth metadata": (post(port, b"", _headers(port, good),
                                    path="/.well-known/oauth-authorization-server"), 404),
        }  # fmt: skip
        for what, ((status, _body), expected) in refusals.items():
            assert status == expected, what
        # The same request with the right token and headers does start a session.
        status, body = post(port, tool_call("pi_capabilities_get", {}), _headers(port, good))
        assert status == 200, body
        assert b"configFingerprint" in body
    tools = [line["action"] for line in server.audit_lines() if line["action"].startswith("pi_")]
    assert tools == ["pi_capabilities_get"]
    sessions = server.paths.state_dir / "sessions"
    assert not sessions.exists() or not any(sessions.iterdir())
    assert_no_process_in(server.root / "ws")
    assert running(server.paths) is None


def test_a_session_belongs_to_the_client_that_started_it(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    alpha = tokens.create(server.paths, "alpha")
    beta = tokens.create(server.paths, "beta")

    async def scenario(url: str) -> None:
        async with http_client(url, alpha) as a, http_client(url, beta) as b:
            sid = (await a.ok("pi_session_start", HOST_CODE))["session"]["sessionId"]
            turn = await a.ok("pi_session_prompt", {"sessionId": sid, "message": HELLO_PROMPT})
            done = await a.wait_turn(sid, turn["turnId"])
            assert done["text"] == HELLO_TEXT
            for tool, args in (
                ("pi_session_get", {"sessionId": sid}),
                ("pi_session_prompt", {"sessionId": sid, "message": HELLO_PROMPT}),
                ("pi_turn_get", {"sessionId": sid, "turnId": turn["turnId"]}),
                ("pi_session_abort", {"sessionId": sid}),
                ("pi_session_close", {"sessionId": sid}),
            ):
                assert await b.code(tool, args) == "session_unknown", tool
            assert (await b.ok("pi_session_list"))["sessions"] == []
            assert [s["sessionId"] for s in (await a.ok("pi_session_list"))["sessions"]] == [sid]
            assert (await a.ok("pi_session_get", {"sessionId": sid}))["session"]["state"] == "idle"
            await a.ok("pi_session_close", {"sessionId": sid})

    with running_service(server) as service:
        anyio.run(scenario, service.url)
    lines = [line for line in server.audit_lines() if line["action"].startswith("pi_")]
    by_client = {(line["client"], line["action"], line["outcome"]) for line in lines}
    assert ("alpha", "pi_session_start", "ok") in by_client
    assert ("beta", "pi_session_close", "session_unknown") in by_client
    assert ("alpha", "pi_session_close", "ok") in by_client
    assert_no_process_in(server.root / "ws")


def test_a_killed_service_leaves_what_a_killed_serve_leaves(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    key = server.env["WRITERPOOL_TEST_SCRIPTED_KEY"]
    token = tokens.create(server.paths, "alpha")

    async def start(url: str) -> None:
        async with http_client(url, token) as client:
            sid = (await client.ok("pi_session_start", HOST_CODE))["session"]["sessionId"]
            await client.ok("pi_session_prompt", {"sessionId": sid, "message": "take-your-time"})

    with running_service(server) as service:
        anyio.run(start, service.url)
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(10)
        socket = Path(service.record["socket"])
    # pi exits when its stdin (a pipe from the dead service) closes.
    assert_no_process_in(server.root / "ws")
    assert files_holding(server.paths.state_dir, key) != []  # nobody could clean up
    assert running(server.paths) is None  # its record names a dead process

    async def next_server() -> None:
        async with connect(server) as client:
            await client.ok("pi_capabilities_get")

    anyio.run(next_server)
    assert files_holding(server.paths.state_dir, key) == []
    # The next service takes over the socket the killed one left.
    with running_service(server) as service:
        assert Path(service.record["socket"]) == socket and socket.is_socket()
    assert not socket.exists()


def test_service_start_status_stop_and_the_loopback_url(make_server: MakeServer) -> None:
    from click.testing import CliRunner

    from writerpool.cli.main import cli

    make_server()
    runner = CliRunner()
    try:
        started = json.loads(runner.invoke(cli, ["service", "start", "--json"]).output)
        status = json.loads(runner.invoke(cli, ["service", "status", "--json"]).output)
        assert status["data"]["url"] == started["data"]["url"]
        assert status["data"]["url"].startswith("http://127.0.0.1:")
        assert status["data"]["url"].endswith("/mcp")
    finally:
        stopped = json.loads(runner.invoke(cli, ["service", "stop", "--json"]).output)
    assert stopped["data"]["running"] is False
    after = json.loads(runner.invoke(cli, ["service", "status", "--json"]).output)
    assert after["data"]["running"] is False


def test_serve_relays_to_a_running_service_and_closes_its_sessions_when_its_client_leaves(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    other = tokens.create(server.paths, "alpha")

    async def through_serve() -> str:
        async with connect(server) as client:
            caps = await client.ok("pi_capabilities_get")
            assert caps["reloadPolicy"] == "on-change"  # the service answered
            sid = (await client.ok("pi_session_start", HOST_CODE))["session"]["sessionId"]
            turn = await client.ok("pi_session_prompt", {"sessionId": sid, "message": HELLO_PROMPT})
            assert (await client.wait_turn(sid, turn["turnId"]))["text"] == HELLO_TEXT
            return str(sid)

    async def as_alpha(url: str, sid: str) -> None:
        async with http_client(url, other) as alpha:
            assert await alpha.code("pi_session_get", {"sessionId": sid}) == "session_unknown"

    with running_service(server) as service:
        sid = anyio.run(through_serve)
        anyio.run(as_alpha, service.url, sid)
        assert_no_process_in(server.root / "ws")  # the relay closed its session
    lines = server.audit_lines()
    [relay] = {line["client"] for line in lines if line["action"] == "pi_session_start"}
    assert relay.startswith("serve-")
    closes = [line for line in lines if line["action"] == "pi_session_close"]
    assert [(line["client"], line["session"], line["outcome"]) for line in closes] == [
        (relay, sid, "ok")
    ]
    assert set(tokens.load(server.paths)) == {"alpha"}  # the relay's token was revoked


def test_the_service_reloads_valid_settings_and_keeps_the_last_good_on_an_invalid_change(
    make_server: MakeServer,
) -> None:
    from writerpool.doctor.model import CheckContext
    from writerpool.doctor.pool_service import service_settings

    server = make_server()
    token = tokens.create(server.paths, "alpha")
    config = server.paths.config_file
    extra = server.root / "ws" / "extra"
    extra.mkdir(parents=True)

    async def capabilities(url: str) -> dict[str, object]:
        async with http_client(url, token) as client:
            return await client.ok("pi_capabilities_get")

    with running_service(server) as service:
        before = anyio.run(capabilities, service.url)
        assert before["reloadPolicy"] == "on-change"
        line = f'extra = "{extra}"\n'
        config.write_text(config.read_text().replace("[workspaces]\n", "[workspaces]\n" + line, 1))
        added = anyio.run(capabilities, service.url)
        assert added["configFingerprint"] != before["configFingerprint"]
        assert "extra" in {w["alias"] for w in added["workspaces"]}  # type: ignore[attr-defined]
        config.write_text(config.read_text() + "\nnot_a_setting = 1\n")
        kept = anyio.run(capabilities, service.url)
        assert kept["configFingerprint"] == added["configFingerprint"]
        ctx = CheckContext(server.paths, None)  # type: ignore[arg-type]
        [finding] = service_settings(ctx)
        assert (finding.id, finding.severity) == ("service_settings", "error")
        assert "config_invalid" in finding.message


# The SDK warns that protocol 2026-07-28 drops logging; today's clients still use it.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_one_client_silencing_failure_lines_silences_no_other(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    """`logging/setLevel` is each client's own: the quiet one hears no failure line, the
    other still hears its own."""
    server = make_server(pi_prefix)
    # The workspace directory vanishes: a session there cannot start (session_start_failed).
    server.workspaces["demo"].rename(server.workspaces["demo"].with_name("gone"))
    heard: dict[str, list[Any]] = {"quiet": [], "loud": []}
    start = {"workspace": "demo"}

    def listener(name: str) -> Any:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            heard[name].append(params.data)

        return on_log

    async def scenario(url: str, quiet: str, loud: str) -> None:
        async with (
            http_client(url, quiet, logging_callback=listener("quiet")) as q,
            http_client(url, loud, logging_callback=listener("loud")) as other,
        ):
            await q.session.set_logging_level("critical")
            assert await q.code("pi_session_start", start) == "session_start_failed"
            assert await other.code("pi_session_start", start) == "session_start_failed"
            with anyio.fail_after(30):
                while not heard["loud"]:  # the line comes before the answer, on its stream
                    await anyio.sleep(0.05)
            assert [line["event"] for line in heard["loud"]] == ["session_start_failed"]
            # The quiet client asks for errors again, and hears its own from then on.
            await q.session.set_logging_level("error")
            assert await q.code("pi_session_start", start) == "session_start_failed"
            with anyio.fail_after(30):
                while not heard["quiet"]:
                    await anyio.sleep(0.05)
            assert len(heard["quiet"]) == 1 and len(heard["loud"]) == 1

    quiet, loud = tokens.create(server.paths, "quiet"), tokens.create(server.paths, "loud")
    with running_service(server) as service:
        anyio.run(scenario, service.url, quiet, loud)
