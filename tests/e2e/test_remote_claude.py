"""A Claude Code coding session on a writer on the test host (a second Podman host over
SSH): a real MCP client, `writerpool serve`, the writer's container on that host with its
storage there, Claude Code's requests through the in-writer forwarder, the session's
socket forwarded back to this machine's proxy, and on to the scripted Anthropic Messages
provider, whose script makes Claude Code commit on a new branch in the writer. The
operator then collects that commit as a review ref. The provider's key never enters the
writer: no process of its container and no file Claude Code can read holds it, nor does
the writer's agent volume on the host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import KEY_ENV, MakeServer
from tests.e2e.harness import connect
from tests.e2e.test_claude_writer import BRANCH, DONE_TEXT, DUMP, PROMPT, SCRIPT, claude_profile
from tests.integration.test_collect_helpers import collected
from tests.integration.writers_support import codes, git, make_checkout, wp
from tests.support.testhost import add_host
from writerpool.agent.scripted_messages import ScriptedMessages
from writerpool.config.hosts import HostConfig
from writerpool.config.paths import Paths
from writerpool.runtime import volumes
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import connect as connect_host
from writerpool.runtime.spec import LABEL_WRITER

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.remote]

WRITER = "boxed-w1"
CONTAINER = f"writerpool-{WRITER}"
START = {"workspace": "boxed", "executionProfile": "claude"}


@pytest.fixture(scope="module")
def messages() -> Iterator[ScriptedMessages]:
    with ScriptedMessages(SCRIPT) as provider:
        yield provider


def _claude_writer_there() -> None:
    """boxed-w1 on th for the Claude Code profile, the way an operator places one: the
    image sent there, the isolation control run there, the writer provisioned and
    accepted there (acceptance proves Claude Code's directory points at the forwarder
    and its request reaches the provider through the proxy with the real key)."""
    wp("image", "transfer", "--host", "th", check=True)
    wp("control", "--host", "th", "--apply", check=True)
    options = ["--profiles", "claude", "--network", "provider", "--writers", "1"]
    code, report = wp("mode", "set", "boxed", "container", *options, "--hosts", "th", "--apply")
    assert code == 0 and "writer_accepted" in codes(report), report
    [accepted] = [f for f in report["findings"] if f["code"] == "writer_accepted"]
    assert accepted["data"]["networkClass"] == "limited", accepted


def test_claude_code_commits_on_a_remote_writer_and_the_commit_is_collected(
    tmp_path: Path,
    make_server: MakeServer,
    image_pin: Path,
    testhost: HostConfig,
    messages: ScriptedMessages,
) -> None:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    server = make_server(boxed=checkout)
    claude_profile(server, messages.port)
    add_host(testhost, config=server.paths.config_file)
    wp("control", "--apply", check=True)
    _claude_writer_there()
    key = server.env[KEY_ENV]
    seen: dict[str, str] = {}

    async def scenario() -> None:
        async with connect(server) as client:
            session = (await client.ok("pi_session_start", START))["session"]
            assert (session["placement"], session["writer"]) == ("container", WRITER)
            assert session["agent"] == "claude-code", session
            sid = session["sessionId"]
            body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": PROMPT})
            turn = await client.wait_turn(sid, body["turnId"], limit=300)
            assert (turn["status"], turn["text"]) == ("completed", DONE_TEXT), turn
            assert turn["toolCalls"] == 1, turn
            # While Claude Code runs on th: what its container's processes and files hold.
            with connect_host("th", testhost) as remote:
                seen["dump"] = remote.cli(["exec", CONTAINER, "sh", "-c", DUMP], timeout=120).out
            closed = (await client.ok("pi_session_close", {"sessionId": sid}))["session"]
            assert closed["state"] == "closed"
            client.assert_clean([key])

    try:
        anyio.run(scenario)
        assert "CLAUDE=" in seen["dump"], "Claude Code was running on th"
        assert "OPENED" not in seen["dump"], "another process opened Claude Code's /proc"
        assert '"apiKeyHelper"' in seen["dump"], "the agent directory was read"
        assert key not in seen["dump"]
        # The provider got the real key from this machine's proxy, never from the writer.
        assert messages.recorded("/v1/messages")
        assert messages.last_auth.get("x-api-key") == key
        with connect_host("th", testhost) as remote:
            assert remote.containers(LABEL_WRITER, WRITER) == []
            agent = volumes.volume_root(remote, WRITER, "agent")
            held = remote.host.exec(["grep", "-rlF", "--", key, str(agent)])
            assert held.returncode == 1 and held.out == "", held.out  # searched, none found

        # Nothing reached the operator's checkout until the operator collects; then the
        # commit is a review ref of the writer, by the writer's identity.
        assert git(checkout, "branch", "--list", BRANCH) == ""
        code, report = wp("writer", "collect", WRITER, "--apply")
        assert code == 0 and "writer_collected" in codes(report), report
        ref = git(checkout, "rev-parse", f"refs/remotes/writer-{WRITER}/{BRANCH}")
        assert collected(checkout, WRITER)[BRANCH] == ref
        assert git(checkout, "show", f"{ref}:claude.txt") == "changed by claude"
        assert git(checkout, "log", "-1", "--format=%s", ref) == "change by claude"
        assert git(checkout, "log", "-1", "--format=%cn", ref) == f"{WRITER} (writerpool)"
    finally:
        with connect_host("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), WRITER, remote.name))
