"""A client that asks and then closes its stdin still gets one answer per request, and
nothing it started is left running: `serve` alone cancels the start under way and says
so; a `serve` that relays to the pool service passes on the service's answer, then
closes the session that start made."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import MakeServer
from tests.e2e.harness import RawServer, ServerEnv, assert_no_process_in
from tests.e2e.service_support import running_service

pytestmark = pytest.mark.pi

EXIT_BOUND = 120


@contextlib.contextmanager
def service_if(relayed: bool, server: ServerEnv) -> Iterator[None]:
    if not relayed:
        yield
        return
    with running_service(server):
        yield


@pytest.mark.parametrize("relayed", [False, True], ids=["alone", "relayed"])
def test_a_start_asked_just_before_stdin_closes_is_answered_then_closed(
    make_server: MakeServer, pi_prefix: Path, relayed: bool
) -> None:
    server = make_server(pi_prefix)
    with service_if(relayed, server):
        raw = RawServer(server)
        try:
            raw.initialize()
            raw.send({"id": "start", "method": "tools/call", "params": {
                "name": "pi_session_start",
                "arguments": {"workspace": "hosted", "executionProfile": "code"}}})  # fmt: skip
            assert raw.proc.stdin is not None
            raw.proc.stdin.close()  # while the start is still under way
            assert raw.proc.wait(EXIT_BOUND) == 0
            frames = [json.loads(line) for line in raw.rest_of_stdout().splitlines() if line]
        finally:
            raw.close()
        [answer] = [frame for frame in frames if frame.get("id") == "start"]
        if relayed:
            started = answer["result"]["structuredContent"]
            assert started["ok"], started
        else:
            assert answer["error"]["message"] == "Connection closed"
        assert_no_process_in(server.root / "ws")
    sessions = server.paths.state_dir / "sessions"
    assert not sessions.exists() or not any(sessions.iterdir())
    if relayed:
        closes = [line for line in server.audit_lines() if line["action"] == "pi_session_close"]
        assert [line["session"] for line in closes] == [started["session"]["sessionId"]]
