"""Sessions and operator commands side by side: a cancelled or abandoned start ends
closed and audited, and operator views of a writer run beside sessions starting and
closing on it. Real MCP clients, real `writerpool serve`, real pi, rootless Podman."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import MakeServer
from tests.e2e.harness import RawServer, ServerEnv, assert_no_process_in, connect
from tests.integration.writers_support import make_checkout, wp, writer_containers
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.lease import Lease

pytestmark = [pytest.mark.pi]

WRITER = "boxed-w1"
CODE = {"workspace": "boxed", "executionProfile": "code"}
HOST_CODE = {"workspace": "hosted", "executionProfile": "code"}
# Far shorter than any start: pi alone needs most of a second to answer its first call.
CANCEL_AFTER = 0.2
VIEW_RUNS = 50


def boxed_server(tmp_path: Path, make_server: MakeServer) -> ServerEnv:
    server = make_server(boxed=make_checkout(tmp_path / "checkout", commits=2))
    wp("control", "--apply", check=True)
    wp("mode", "set", "boxed", "container", "--profiles", "code", "--apply", check=True)
    return server


def start_lines(server: ServerEnv, limit: float = 120) -> list[dict[str, Any]]:
    """The audit's pi_session_start lines, once there is one (the worker writes it when
    the start has ended, after the client stopped waiting)."""
    deadline = time.monotonic() + limit
    while True:
        lines = [x for x in server.audit_lines() if x["action"] == "pi_session_start"]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.2)


def assert_ended_cancelled(server: ServerEnv, writer: str | None) -> None:
    lines = start_lines(server)
    assert [line["outcome"] for line in lines] == ["request_cancelled"], lines
    if writer is not None:
        assert writer_containers(writer) == []
        assert lease_is_free(server.paths.writer_dir(writer))


def lease_is_free(writer_dir: Path) -> bool:
    lease = Lease(writer_dir)
    try:
        lease.acquire(wait=0)
    except WriterpoolError:
        return False
    lease.release()
    return True


def _cancelled_start_scenario(server: ServerEnv, start: dict[str, str]) -> list[Any]:
    async def scenario() -> list[Any]:
        async with connect(server) as client:
            with anyio.move_on_after(CANCEL_AFTER) as scope:
                await client.session.call_tool("pi_session_start", start)
            assert scope.cancelled_caught, "the start answered before it was cancelled"
            # In a thread: the client's loop must go on (it sends the cancellation).
            await anyio.to_thread.run_sync(start_lines, server)  # the start has ended
            listed = await client.ok("pi_session_list")
            return [s["state"] for s in listed["sessions"]]

    return anyio.run(scenario)


@pytest.mark.podman
@pytest.mark.image
@pytest.mark.git
def test_a_cancelled_start_in_a_writer_is_closed_and_audited(
    tmp_path: Path, make_server: MakeServer, image_pin: Path
) -> None:
    server = boxed_server(tmp_path, make_server)
    states = _cancelled_start_scenario(server, CODE)
    assert set(states) <= {"closed"}, states  # none left open, holding the writer
    assert_ended_cancelled(server, WRITER)
    line = start_lines(server)[0]
    if states:  # it had started: the audit names the session and its writer
        assert line["session"] and line["writer"] == WRITER


def test_a_cancelled_host_start_leaves_no_pi(make_server: MakeServer, pi_prefix: Path) -> None:
    server = make_server(pi_prefix)
    states = _cancelled_start_scenario(server, HOST_CODE)
    assert set(states) <= {"closed"}, states
    assert_ended_cancelled(server, None)
    assert_no_process_in(server.workspaces["hosted"])


@pytest.mark.podman
@pytest.mark.image
@pytest.mark.git
def test_a_client_leaving_mid_start_leaves_no_session(
    tmp_path: Path, make_server: MakeServer, image_pin: Path
) -> None:
    server = boxed_server(tmp_path, make_server)
    raw = RawServer(server)
    try:
        raw.initialize()
        call = {"name": "pi_session_start", "arguments": CODE}
        raw.send({"id": "start-1", "method": "tools/call", "params": call})
        time.sleep(CANCEL_AFTER)
        assert raw.proc.stdin is not None
        raw.proc.stdin.close()  # the client is gone: the server reads end of file
        assert raw.proc.wait(timeout=300) == 0
    finally:
        raw.close()
    assert_ended_cancelled(server, WRITER)


def _view(args: list[str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "writerpool", *args, "--json"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def _views(count: int, seen: Counter[str], failures: list[Any]) -> None:
    for i in range(count):
        if i % 2:
            code, report = _view(["writer", "status", WRITER])
            rows = report["data"]["writers"]
            outcome = f"status {rows[0]['state']}" if rows else "status none"
            if code != 0 or outcome not in ("status writer_leasable", "status writer_busy"):
                failures.append(report)
        else:
            code, report = _view(["writer", "diff", WRITER, "--stat"])
            outcome = f"diff {report['findings'][0]['code']}"
            if code != 0:
                failures.append(report)
        seen[outcome] += 1


@pytest.mark.podman
@pytest.mark.image
@pytest.mark.git
def test_views_of_a_writer_run_beside_sessions_starting_and_closing(
    tmp_path: Path, make_server: MakeServer, image_pin: Path
) -> None:
    server = boxed_server(tmp_path, make_server)
    seen: Counter[str] = Counter()
    failures: list[Any] = []
    # Two views at a time, on one writer, while sessions start and close on it.
    viewers = [
        threading.Thread(target=_views, args=(VIEW_RUNS // 2, seen, failures)) for _ in range(2)
    ]
    sessions: Counter[str] = Counter()

    async def scenario() -> None:
        async with connect(server) as client:
            while any(v.is_alive() for v in viewers):
                body = await client.call("pi_session_start", CODE)
                sessions["start " + ("ok" if body["ok"] else body["error"]["code"])] += 1
                if body["ok"]:
                    sid = body["session"]["sessionId"]
                    await client.ok("pi_session_close", {"sessionId": sid})
                    sessions["close ok"] += 1
                await anyio.sleep(1)  # a free writer now and then, for status to inspect

    for viewer in viewers:
        viewer.start()
    anyio.run(scenario)
    for viewer in viewers:
        viewer.join()
    print(f"\nviews: {sorted(seen.items())}; sessions: {sorted(sessions.items())}")
    assert failures == []
    assert sum(seen.values()) == VIEW_RUNS
    assert set(sessions) == {"start ok", "close ok"}, sessions
    assert writer_containers(WRITER) == []
