"""The server's process life: stdin EOF and signals close every session, and nothing
but protocol frames ever reaches stdout."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import MakeServer
from tests.e2e.harness import RawServer, assert_no_process_in, connect, files_holding

pytestmark = pytest.mark.pi

# pool.session_close_seconds in the test configuration, plus the interpreter's own exit.
EXIT_BOUND = 10 + 20


@pytest.mark.parametrize("how", ["stdin-eof", "sigterm", "sigint"])
def test_shutdown_closes_every_session_and_leaves_no_pi(
    make_server: MakeServer, pi_prefix: Path, how: str
) -> None:
    server = make_server(pi_prefix)
    key = server.env["WRITERPOOL_TEST_SCRIPTED_KEY"]
    raw = RawServer(server)
    try:
        raw.initialize()
        first = raw.call("pi_session_start", {"workspace": "hosted", "executionProfile": "code"})
        second = raw.call("pi_session_start", {"workspace": "hosted", "executionProfile": "code"})
        assert first["ok"] and second["ok"]
        # One of them is mid-turn when the server is told to stop.
        sid = second["session"]["sessionId"]
        assert raw.call("pi_session_prompt", {"sessionId": sid, "message": "take-your-time"})["ok"]
        assert files_holding(server.paths.state_dir, key) != []
        assert raw.proc.stdin is not None
        if how == "stdin-eof":
            raw.proc.stdin.close()
        else:
            raw.proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        assert raw.proc.wait(EXIT_BOUND) == 0
        assert raw.rest_of_stdout().strip() == b"", "stdout carried something but frames"
    finally:
        raw.close()
    assert_no_process_in(server.root / "ws")
    assert files_holding(server.paths.state_dir, key) == []
    assert not any((server.paths.state_dir / "sessions").iterdir())
    actions = [line["action"] for line in server.audit_lines()]
    assert actions == ["pi_session_start", "pi_session_start", "pi_session_prompt"]


def test_a_killed_server_leaves_no_pi_and_the_next_server_removes_its_credentials(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    key = server.env["WRITERPOOL_TEST_SCRIPTED_KEY"]
    raw = RawServer(server)
    try:
        raw.initialize()
        assert raw.call("pi_session_start", {"workspace": "hosted", "executionProfile": "code"})[
            "ok"
        ]
        raw.proc.kill()
        raw.proc.wait(10)
    finally:
        raw.close()
    # pi exits when its stdin (a pipe from the dead server) closes.
    assert_no_process_in(server.root / "ws")
    assert files_holding(server.paths.state_dir, key) != []  # nobody could clean up

    async def next_server() -> None:
        async with connect(server) as client:
            await client.ok("pi_capabilities_get")

    anyio.run(next_server)
    assert files_holding(server.paths.state_dir, key) == []
