"""Whole sessions through a real MCP client: real pi on the scripted provider, read-only
sessions in their throwaway container, host-mode coding sessions on the host."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import HELLO_TEXT, SLOW_TEXT, WROTE_TEXT, MakeServer
from tests.e2e.harness import Client, assert_no_process_in, connect, files_holding, processes_in
from writerpool.agent.scripted import ScriptedProvider

pytestmark = pytest.mark.pi

HELLO_PROMPT = "say-hello: the secret plan is zebra-7781"
# A host-mode coding session: pi on the host, for the adapter's process handling.
HOST_CODE = {"workspace": "hosted", "executionProfile": "code"}
WRITE_PROMPT = "please-write: the secret plan is okapi-5512"


async def _prompt_and_wait(client: Client, sid: str, message: str) -> dict[str, Any]:
    body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": message})
    assert body["status"] == "running"
    return await client.wait_turn(sid, body["turnId"])


@pytest.mark.podman
@pytest.mark.image
def test_read_only_session_answers_a_prompt_with_the_scripted_text(
    make_server: MakeServer, pi_prefix: Path, image_pin: Path
) -> None:
    server = make_server(pi_prefix)

    async def scenario() -> Client:
        async with connect(server) as client:
            started = await client.ok("pi_session_start", {"workspace": "demo"})
            session = started["session"]
            assert session["placement"] == "readonly_container"
            assert session["permission"] == "read-only"
            assert session["executionProfile"] == "review"
            assert session["state"] == "idle"
            assert "writer" not in session and "base" not in session
            sid = session["sessionId"]
            turn = await _prompt_and_wait(client, sid, HELLO_PROMPT)
            assert turn["status"] == "completed"
            assert turn["stopReason"] == "stop"
            assert turn["text"] == HELLO_TEXT
            got = (await client.ok("pi_session_get", {"sessionId": sid}))["session"]
            assert (got["state"], got["turns"], got["lastTurnId"]) == ("idle", 1, turn["turnId"])
            await client.ok("pi_session_close", {"sessionId": sid})
            # The tombstone still answers for the turns the session ran.
            kept = await client.ok("pi_turn_get", {"sessionId": sid, "turnId": turn["turnId"]})
            assert kept["turn"] == turn
            return client

    client = anyio.run(scenario)
    client.assert_clean([*server.secrets, HELLO_PROMPT, "zebra-7781"])
    lines = server.audit_lines()
    # The read-only session's provider requests went through its proxy, each audited.
    assert [line["status"] for line in lines if line["action"] == "egress"] == [200]
    audit = [line for line in lines if line["action"] != "egress"]
    assert [line["action"] for line in audit] == [
        "pi_session_start", "pi_session_prompt", *["pi_turn_get"] * (len(audit) - 5),
        "pi_session_get", "pi_session_close", "pi_turn_get",
    ]  # fmt: skip
    assert {line["outcome"] for line in audit} == {"ok"}
    assert "zebra" not in server.paths.audit_log.read_text()


@pytest.mark.podman
@pytest.mark.image
def test_read_only_session_cannot_write_even_in_a_host_mode_workspace(
    make_server: MakeServer, pi_prefix: Path, image_pin: Path
) -> None:
    server = make_server(pi_prefix)

    async def scenario() -> Client:
        async with connect(server) as client:
            started = await client.ok("pi_session_start", {"workspace": "hosted"})
            assert started["session"]["permission"] == "read-only"
            turn = await _prompt_and_wait(client, started["session"]["sessionId"], WRITE_PROMPT)
            # pi told the model its write and bash tools do not exist; the model went on.
            assert turn["status"] == "completed"
            assert turn["text"] == WROTE_TEXT
            return client

    client = anyio.run(scenario)
    workspace = server.workspaces["hosted"]
    assert not (workspace / "created.txt").exists()
    assert not (workspace / "by-bash.txt").exists()
    client.assert_clean([*server.secrets, WRITE_PROMPT, "okapi-5512"])


def test_coding_sessions_in_host_and_unset_workspaces_write_into_the_checkout(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)

    async def scenario() -> Client:
        async with connect(server) as client:
            for alias in ("hosted", "demo"):
                args = {"workspace": alias, "executionProfile": "code"}
                session = (await client.ok("pi_session_start", args))["session"]
                assert (session["placement"], session["permission"]) == ("host", "coding")
                turn = await _prompt_and_wait(client, session["sessionId"], WRITE_PROMPT)
                assert (turn["status"], turn["text"]) == ("completed", WROTE_TEXT)
                await client.ok("pi_session_close", {"sessionId": session["sessionId"]})
            return client

    client = anyio.run(scenario)
    for alias in ("hosted", "demo"):
        workspace = server.workspaces[alias]
        assert (workspace / "created.txt").read_text() == "written by pi\n"
        assert (workspace / "by-bash.txt").exists()
    client.assert_clean([*server.secrets, WRITE_PROMPT, "okapi-5512"])


def test_abort_during_a_long_turn_ends_it_as_aborted_and_the_session_goes_on(
    make_server: MakeServer, pi_prefix: Path, scripted: ScriptedProvider
) -> None:
    server = make_server(pi_prefix)

    async def scenario() -> Client:
        async with connect(server) as client:
            sid = (await client.ok("pi_session_start", HOST_CODE))["session"]["sessionId"]
            before = scripted.request_count
            body = await client.ok(
                "pi_session_prompt", {"sessionId": sid, "message": "take-your-time please"}
            )
            turn_id = body["turnId"]
            with anyio.fail_after(60):
                while scripted.request_count == before:  # the provider is streaming now
                    await anyio.sleep(0.1)
            busy = {"sessionId": sid, "message": "say-hello"}
            assert await client.code("pi_session_prompt", busy) == "session_busy"
            got = await client.ok("pi_session_get", {"sessionId": sid})
            assert got["session"]["state"] == "running"
            running = await client.ok("pi_turn_get", {"sessionId": sid, "turnId": turn_id})
            assert (running["turn"]["status"], running["turn"]["text"]) == ("running", None)
            aborted = await client.ok("pi_session_abort", {"sessionId": sid})
            assert aborted == {"ok": True, "sessionId": sid, "turnId": turn_id, "aborted": True}
            turn = await client.wait_turn(sid, turn_id)
            assert turn["status"] == "aborted"
            assert turn["text"] is None
            again = await client.ok("pi_session_abort", {"sessionId": sid})
            assert (again["aborted"], again["turnId"]) == (False, None)
            after = await _prompt_and_wait(client, sid, HELLO_PROMPT)
            assert (after["status"], after["text"]) == ("completed", HELLO_TEXT)
            return client

    client = anyio.run(scenario)
    client.assert_clean([*server.secrets, SLOW_TEXT, HELLO_PROMPT])


def test_close_is_idempotent_removes_the_credential_and_leaves_a_tombstone(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    key = server.env["WRITERPOOL_TEST_SCRIPTED_KEY"]
    sessions_dir = server.paths.state_dir / "sessions"

    async def scenario() -> Client:
        async with connect(server) as client:
            sid = (await client.ok("pi_session_start", HOST_CODE))["session"]["sessionId"]
            # While the session runs, its credential sits in its private agent directory.
            holders = files_holding(sessions_dir, key)
            assert [p.name for p in holders] == ["models.json"]
            assert stat.S_IMODE(os.stat(holders[0]).st_mode) == 0o600
            assert processes_in(server.workspaces["hosted"]) != []
            first = await client.ok("pi_session_close", {"sessionId": sid})
            assert first["session"]["state"] == "closed"
            assert first["session"]["closedAt"] is not None
            assert files_holding(sessions_dir, key) == []
            second = await client.ok("pi_session_close", {"sessionId": sid})
            assert second == first
            got = await client.ok("pi_session_get", {"sessionId": sid})
            assert got["session"] == first["session"]
            listed = await client.ok("pi_session_list")
            assert [s["state"] for s in listed["sessions"]] == ["closed"]
            prompt = {"sessionId": sid, "message": "say-hello"}
            assert await client.code("pi_session_prompt", prompt) == "session_closed"
            assert await client.code("pi_session_abort", {"sessionId": sid}) == "session_closed"
            turn = {"sessionId": sid, "turnId": "t-1"}
            assert await client.code("pi_turn_get", turn) == "turn_unknown"
            return client

    client = anyio.run(scenario)
    assert_no_process_in(server.root / "ws")
    client.assert_clean(server.secrets)
    assert files_holding(server.paths.state_dir, key) == []


def test_a_session_whose_agent_dies_reports_failed_and_still_closes(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    key = server.env["WRITERPOOL_TEST_SCRIPTED_KEY"]

    async def scenario() -> Client:
        async with connect(server) as client:
            sid = (await client.ok("pi_session_start", HOST_CODE))["session"]["sessionId"]
            slow = {"sessionId": sid, "message": "take-your-time"}
            body = await client.ok("pi_session_prompt", slow)
            for pid in processes_in(server.workspaces["hosted"]):
                os.kill(pid, signal.SIGKILL)
            turn = await client.wait_turn(sid, body["turnId"])
            assert (turn["status"], turn["text"]) == ("failed", None)
            got = await client.ok("pi_session_get", {"sessionId": sid})
            assert got["session"]["state"] == "failed"
            prompt = {"sessionId": sid, "message": "say-hello"}
            assert await client.code("pi_session_prompt", prompt) == "session_failed"
            closed = await client.ok("pi_session_close", {"sessionId": sid})
            assert closed["session"]["state"] == "closed"
            return client

    client = anyio.run(scenario)
    client.assert_clean(server.secrets)
    assert files_holding(server.paths.state_dir, key) == []
