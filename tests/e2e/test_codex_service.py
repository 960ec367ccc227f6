"""A coding session of a `codex` profile through the pool service: a real MCP client
over streamable HTTP with a client's token, `writerpool service run`, a leased writer on
real rootless Podman, the image's Codex in it on the scripted OpenAI Responses provider
(one `codex exec` process per turn); its commit is collected as a review ref. The key
never enters the writer, and the audit names the client that started the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import KEY_ENV
from tests.e2e.harness import files_holding
from tests.e2e.pool_support import containers_of, result_value
from tests.e2e.service_support import http_client, running_service
from tests.e2e.test_codex_sessions import (
    BRANCH,
    COMMIT_PROMPT,
    NEXT_PROMPT,
    NEXT_TEXT,
    SCRIPT,
    codex_writer,
    run_turn,
)
from tests.integration.writers_support import git, wp
from writerpool.agent.scripted_responses import ScriptedResponses
from writerpool.state import tokens

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.fixture
def provider() -> Iterator[ScriptedResponses]:
    with ScriptedResponses(SCRIPT) as scripted:
        yield scripted


def test_codex_commits_through_the_service_and_the_commit_becomes_a_review_ref(
    tmp_path: Path, provider: ScriptedResponses, image_pin: Path
) -> None:
    server, alias = codex_writer(tmp_path, provider.port)
    checkout, key, name = server.workspaces[alias], server.env[KEY_ENV], f"{alias}-w1"
    token = tokens.create(server.paths, "alpha")
    start = {"workspace": alias, "executionProfile": "codex"}

    async def scenario(url: str) -> tuple[str, str]:
        async with http_client(url, token) as client:
            session = (await client.ok("pi_session_start", start))["session"]
            assert (session["placement"], session["writer"]) == ("container", name)
            assert session["agent"] == "codex"
            sid = session["sessionId"]
            committed = await run_turn(client, sid, COMMIT_PROMPT)
            assert committed["status"] == "completed" and committed["toolCalls"] == 1, committed
            # The next turn's process resumes the thread.
            following = await run_turn(client, sid, NEXT_PROMPT)
            assert (following["status"], following["text"]) == ("completed", NEXT_TEXT)
            closed = (await client.ok("pi_session_close", {"sessionId": sid}))["session"]
            assert closed["state"] == "closed"
            client.assert_clean([*server.secrets, "heron-2718"])
            return str(sid), result_value(committed["text"], "commit")

    with running_service(server) as service:
        sid, commit = anyio.run(scenario, service.url)
    # Every request reached the provider with the real key, put there by the proxy.
    requests = provider.recorded("/v1/responses")
    assert len(requests) >= 3  # the command, its result, the next turn
    assert {r.headers.get("authorization") for r in requests} == {f"Bearer {key}"}
    assert containers_of(name) == []
    assert files_holding(server.paths.writer_dir(name) / "agent", key) == []
    assert files_holding(server.paths.state_dir, key) == []
    [started] = [a for a in server.audit_lines() if a["action"] == "pi_session_start"]
    assert (started["session"], started["client"], started["outcome"]) == (sid, "alpha", "ok")
    # Nothing reached the operator's checkout until the operator collects.
    assert git(checkout, "branch", "--list", BRANCH) == ""
    wp("writer", "collect", name, "--apply", check=True)
    ref = f"refs/remotes/writer-{name}/{BRANCH}"
    assert git(checkout, "rev-parse", ref) == commit
    assert git(checkout, "log", "-1", "--format=%s", ref) == "feature from codex"
    assert git(checkout, "branch", "--list", BRANCH) == ""  # a review ref, not a branch
