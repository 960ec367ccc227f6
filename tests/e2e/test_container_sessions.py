"""A coding session in a container workspace: a real MCP client, `writerpool serve`,
a leased writer on real rootless Podman, and pi inside it on the scripted provider."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import LONG_TEXTS, WROTE_TEXT, MakeServer
from tests.e2e.harness import Client, connect, files_holding
from tests.integration.writers_support import git, make_checkout, wp, writer_containers

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

WRITE_PROMPT = "please-write: inside the writer, the plan is ibis-3141"
WRITER = "boxed-w1"


def test_container_coding_session_leases_a_writer_and_works_in_its_clone(
    tmp_path: Path, make_server: MakeServer, image_pin: Path
) -> None:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    server = make_server(boxed=checkout)
    key = server.env["WRITERPOOL_TEST_SCRIPTED_KEY"]
    wp("control", "--apply", check=True)
    wp("mode", "set", "boxed", "container", "--profiles", "code", "--apply", check=True)
    clone = server.paths.writer_dir(WRITER) / "clone"
    agent_dir = server.paths.writer_dir(WRITER) / "agent"
    main_commit = git(checkout, "rev-parse", "main")
    code = {"workspace": "boxed", "executionProfile": "code"}

    async def scenario() -> Client:
        async with connect(server) as client:
            caps = await client.ok("pi_capabilities_get")
            boxed = next(w for w in caps["workspaces"] if w["alias"] == "boxed")
            assert (boxed["mode"], boxed["writers"], boxed["defaultBase"]) == (
                "container", 1, "main",
            )  # fmt: skip
            no_base = {**code, "base": "no-such-branch"}
            # A base the checkout lacks is named as such, not as a shortage of writers.
            assert await client.code("pi_session_start", no_base) == "writer_base_unavailable"
            session = (await client.ok("pi_session_start", {**code, "base": "main"}))["session"]
            assert session["placement"] == "container"
            assert session["writer"] == WRITER
            assert session["base"] == {"ref": "main", "commit": main_commit}
            sid = session["sessionId"]
            # The one writer is leased: a second coding session finds none free.
            assert await client.code("pi_session_start", code) == "writer_unavailable"
            # The writer holds no credential: the session's proxy on the host has it.
            assert files_holding(agent_dir, key) == []
            assert stat.S_IMODE(os.stat(agent_dir / "models.json").st_mode) == 0o600
            assert files_holding(clone, key) == []
            assert writer_containers(WRITER) == [f"writerpool-{WRITER}"]
            body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": WRITE_PROMPT})
            turn = await client.wait_turn(sid, body["turnId"], limit=300)
            assert (turn["status"], turn["text"]) == ("completed", WROTE_TEXT)
            assert (clone / "created.txt").read_text() == "written by pi\n"
            assert (clone / "by-bash.txt").exists()
            got = (await client.ok("pi_session_get", {"sessionId": sid}))["session"]
            assert (got["writer"], got["base"]) == (WRITER, session["base"])
            closed = (await client.ok("pi_session_close", {"sessionId": sid}))["session"]
            assert closed["state"] == "closed" and closed["writer"] == WRITER
            assert (await client.ok("pi_session_close", {"sessionId": sid}))["session"] == closed
            assert writer_containers(WRITER) == []
            assert files_holding(agent_dir, key) == []
            # The writer now holds uncollected work: the session guard refuses it ...
            assert await client.code("pi_session_start", code) == "writer_unavailable"
            # ... until the operator resets it; the server sees that without a restart.
            wp("writer", "reset", WRITER, "--discard", "--apply", check=True)
            again = (await client.ok("pi_session_start", code))["session"]
            assert again["writer"] == WRITER
            await client.ok("pi_session_close", {"sessionId": again["sessionId"]})
            return client

    client = anyio.run(scenario)
    client.assert_clean([*server.secrets, WRITE_PROMPT, "ibis-3141"])
    # The work happened in the writer's clone, never in the operator's checkout.
    assert not (checkout / "created.txt").exists()
    assert git(checkout, "status", "--porcelain") == ""
    assert writer_containers(WRITER) == []
    audit = server.audit_lines()
    starts = [line for line in audit if line["action"] == "pi_session_start"]
    assert [line["outcome"] for line in starts] == [
        "writer_base_unavailable", "ok", "writer_unavailable", "writer_unavailable", "ok",
    ]  # fmt: skip
    assert {line["writer"] for line in audit if line["session"] == sid_of(starts[1])} == {WRITER}
    assert "ibis" not in server.paths.audit_log.read_text()


def sid_of(line: dict[str, object]) -> object:
    return line["session"]


def test_long_answers_in_small_deltas_complete_inside_a_writer(
    tmp_path: Path, make_server: MakeServer, image_pin: Path
) -> None:
    server = make_server(boxed=make_checkout(tmp_path / "checkout", commits=1))
    wp("control", "--apply", check=True)
    wp("mode", "set", "boxed", "container", "--profiles", "code", "--apply", check=True)

    async def scenario() -> None:
        async with connect(server) as client:
            code = {"workspace": "boxed", "executionProfile": "code"}
            sid = (await client.ok("pi_session_start", code))["session"]["sessionId"]
            for prompt, text in LONG_TEXTS.items():
                body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": prompt})
                turn = await client.wait_turn(sid, body["turnId"], limit=300)
                assert turn["status"] == "completed", turn
                # The first page of the 64 KiB kept; the rest comes by offset.
                assert text.startswith(turn["text"]) and turn["textLength"] == 64 * 1024
                assert turn["textTruncated"] is True
                last = await client.ok(
                    "pi_turn_get",
                    {"sessionId": sid, "turnId": body["turnId"], "offset": 60000, "limit": 65536},
                )
                assert last["turn"]["text"] == text[60000 : 64 * 1024]
            await client.ok("pi_session_close", {"sessionId": sid})

    anyio.run(scenario)
    assert writer_containers(WRITER) == []
