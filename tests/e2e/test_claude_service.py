"""A coding session of a `claude-code` profile through the pool service: a real MCP
client over streamable HTTP with a client's token, `writerpool service run`, a leased
writer on real rootless Podman, the image's Claude Code in it on the scripted Anthropic
Messages provider; its commit is collected as a review ref. The key never enters the
writer, and the audit names the client that started the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import KEY_ENV, MakeServer
from tests.e2e.harness import files_holding
from tests.e2e.service_support import http_client, running_service
from tests.e2e.test_claude_writer import BRANCH, DONE_TEXT, PROMPT, SCRIPT, WRITER, claude_writer
from tests.integration.writers_support import git, wp, writer_containers
from writerpool.agent.scripted_messages import ScriptedMessages
from writerpool.state import tokens

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.fixture
def messages() -> Iterator[ScriptedMessages]:
    with ScriptedMessages(SCRIPT) as provider:
        yield provider


def test_claude_code_commits_through_the_service_and_the_commit_becomes_a_review_ref(
    tmp_path: Path, make_server: MakeServer, image_pin: Path, messages: ScriptedMessages
) -> None:
    server = claude_writer(tmp_path, make_server, messages.port)
    checkout, key = tmp_path / "checkout", server.env[KEY_ENV]
    token = tokens.create(server.paths, "alpha")
    start = {"workspace": "boxed", "executionProfile": "claude"}

    async def scenario(url: str) -> tuple[str, str]:
        async with http_client(url, token) as client:
            session = (await client.ok("pi_session_start", start))["session"]
            assert (session["placement"], session["writer"]) == ("container", WRITER)
            assert session["agent"] == "claude-code"
            sid = session["sessionId"]
            body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": PROMPT})
            turn = await client.wait_turn(sid, body["turnId"], limit=300)
            assert (turn["status"], turn["text"]) == ("completed", DONE_TEXT), turn
            assert turn["toolCalls"] == 1
            closed = (await client.ok("pi_session_close", {"sessionId": sid}))["session"]
            assert closed["state"] == "closed"
            client.assert_clean([key])
            return str(sid), str(turn["turnId"])

    with running_service(server) as service:
        sid, _ = anyio.run(scenario, service.url)
    # The provider got the real key from the session's proxy, never from the writer.
    assert messages.recorded("/v1/messages")
    assert messages.last_auth.get("x-api-key") == key
    assert writer_containers(WRITER) == []
    assert files_holding(server.paths.writer_dir(WRITER) / "agent", key) == []
    assert files_holding(server.paths.state_dir, key) == []
    [started] = [a for a in server.audit_lines() if a["action"] == "pi_session_start"]
    assert (started["session"], started["client"], started["outcome"]) == (sid, "alpha", "ok")
    # Nothing reached the operator's checkout until the operator collects.
    assert git(checkout, "branch", "--list", BRANCH) == ""
    wp("writer", "collect", WRITER, "--apply", check=True)
    collected = git(checkout, "rev-parse", f"refs/remotes/writer-{WRITER}/{BRANCH}")
    assert git(checkout, "show", f"{collected}:claude.txt") == "changed by claude"
    assert git(checkout, "log", "-1", "--format=%s", collected) == "change by claude"
    assert git(checkout, "branch", "--list", BRANCH) == ""  # a review ref, not a branch
