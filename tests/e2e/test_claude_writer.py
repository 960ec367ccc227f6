"""A coding session of a profile with `agent = "claude-code"`: a real MCP client on
`writerpool serve`, a leased writer on real rootless Podman, the image's Claude Code in
it on `provider` networking, its requests through the in-writer forwarder and the
session's proxy to the scripted Anthropic Messages provider, whose script makes Claude
Code run bash in the writer (a file, a commit on a new branch); then the operator
collects the work. The provider's key never enters the writer. A read-only profile of
Claude Code runs in a throwaway container with the checkout read-only, as pi's and
Codex's do."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import KEY_ENV, MakeServer
from tests.e2e.harness import Client, ServerEnv, connect, files_holding
from tests.integration.test_collect_helpers import snapshot
from tests.integration.writers_support import git, make_checkout, podman, wp, writer_containers
from tests.support.cli import run_cli
from writerpool.agent.scripted import Script, ScriptEntry, Step, ToolCall
from writerpool.agent.scripted_messages import ScriptedMessages

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

WRITER = "boxed-w1"
CONTAINER = f"writerpool-{WRITER}"
BRANCH = "claude-change"
PROMPT = "claude-commit: change the file on a new branch"
DONE_TEXT = "The change is committed."
COMMAND = (
    f"git checkout -q -b {BRANCH} && printf 'changed by claude\\n' > claude.txt && "
    "git add claude.txt && git -c user.name=claude -c user.email=claude@example.invalid "
    "commit -q -m 'change by claude' && git rev-parse HEAD"
)
PEEK_PROMPT = "claude-peek: read only"
PEEK_FILE = "/work/file1.txt"
PEEK_WRITE = 'touch /work/probe.txt; echo "write-exit=$?"'
AFTER_PROMPT = "claude-after: still there?"
AFTER_TEXT = "Still here after the abort."
SCRIPT = Script(
    scripts=[
        # First: after an abort, Claude Code 2.1.332 sends the interrupted prompt and the
        # next one as one user message (the first entry that matches answers).
        ScriptEntry(match="claude-after", steps=[Step(text=AFTER_TEXT)]),
        ScriptEntry(
            match="claude-commit",
            steps=[
                Step(tool_calls=[ToolCall(name="bash", arguments={"command": COMMAND})]),
                Step(text=DONE_TEXT),
            ],
        ),
        ScriptEntry(match="take-your-time", steps=[Step(text="slow", delay_seconds=300)]),
        # A read-only session: a read of the checkout, then a write Claude Code must not do.
        ScriptEntry(
            match="claude-peek",
            steps=[
                Step(tool_calls=[ToolCall(name="Read", arguments={"file_path": PEEK_FILE})]),
                Step(tool_calls=[ToolCall(name="bash", arguments={"command": PEEK_WRITE})]),
                Step(text="{tool_results}"),
            ],
        ),
    ],
    default=[Step(text="default answer")],
)
# What every process in the writer and every file Claude Code can read hold: each
# readable process environment (PID 1, the forwarder, and Claude Code itself, on its
# execute-only binary, are not dumpable: unreadable), the agent directory and Claude
# Code's state on the tmpfs; then whether Claude Code's own environment and descriptors
# could be opened by another process of the writer (they must not).
DUMP = (
    'for f in /proc/[0-9]*/environ; do cat "$f" 2>/dev/null; echo; done; '
    "find /pi/agent /tmp /home -type f -exec cat {} + 2>/dev/null; "
    "for p in $(pgrep -x claude); do cat /proc/$p/environ >/dev/null 2>&1 && echo OPENED; "
    "ls /proc/$p/fd >/dev/null 2>&1 && echo OPENED; echo CLAUDE=$p; done; true"
)


KILL_CLAUDE = "until pkill -9 -x claude; do sleep 0.2; done"


@pytest.fixture(scope="module")
def messages() -> Iterator[ScriptedMessages]:
    with ScriptedMessages(SCRIPT) as provider:
        yield provider


def claude_profile(server: ServerEnv, port: int) -> None:
    """A coding profile of Claude Code on a provider that speaks Anthropic Messages (the
    example in docs/execution-modes.md), and a read-only one on the same provider."""
    text = server.paths.config_file.read_text()
    server.paths.config_file.write_text(
        text
        + "\n[profiles.claude]\n"
        + 'permission = "coding"\nagent = "claude-code"\nprovider = "messages"\n'
        + 'model = "scripted-model"\nthinking = "off"\n'
        + "\n[profiles.claude-review]\n"
        + 'permission = "read-only"\nagent = "claude-code"\nprovider = "messages"\n'
        + 'model = "scripted-model"\n'
        + "\n[providers.messages]\n"
        + f'api = "anthropic-messages"\nbase_url = "http://127.0.0.1:{port}"\n'
        + f'api_key_env = "{KEY_ENV}"\n'
    )


def claude_writer(tmp_path: Path, make_server: MakeServer, port: int) -> ServerEnv:
    """A server whose workspace `boxed` has one accepted writer for the Claude Code
    profile (the isolation control recorded first)."""
    server = make_server(boxed=make_checkout(tmp_path / "checkout", commits=2))
    claude_profile(server, port)
    wp("control", "--apply", check=True)
    wp("mode", "set", "boxed", "container", "--profiles", "claude", "--apply", check=True)
    return server


def test_claude_code_commits_in_a_writer_and_the_work_is_collected(
    tmp_path: Path, make_server: MakeServer, image_pin: Path, messages: ScriptedMessages
) -> None:
    server = claude_writer(tmp_path, make_server, messages.port)
    checkout, key = tmp_path / "checkout", server.env[KEY_ENV]
    agent_dir = server.paths.writer_dir(WRITER) / "agent"
    start = {"workspace": "boxed", "executionProfile": "claude"}
    seen: dict[str, str] = {}
    before = snapshot(checkout)

    async def scenario() -> Client:
        async with connect(server) as client:
            session = (await client.ok("pi_session_start", start))["session"]
            assert (session["placement"], session["writer"]) == ("container", WRITER)
            sid = session["sessionId"]
            body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": PROMPT})
            turn = await client.wait_turn(sid, body["turnId"], limit=300)
            assert (turn["status"], turn["text"]) == ("completed", DONE_TEXT), turn
            assert (turn["toolCalls"], turn["stopReason"]) == (1, "stop"), turn
            # While Claude Code runs: no process, no file it can read holds the key.
            seen["dump"] = podman("exec", CONTAINER, "sh", "-c", DUMP)
            seen["agent"] = str(files_holding(agent_dir, key))
            closed = (await client.ok("pi_session_close", {"sessionId": sid}))["session"]
            assert closed["state"] == "closed"
            seen["peek"], seen["peek_session"] = await _read_only_session(client)
            return client

    client = anyio.run(scenario)
    # The read-only session read the checkout, wrote nothing and left no container.
    assert "content 1" in seen["peek"], seen["peek"]
    assert "write-exit=0" not in seen["peek"]  # its Bash was refused (plan mode) or failed
    assert snapshot(checkout) == before
    assert f"writerpool-ro-{seen['peek_session']}" not in podman_names()
    assert "CLAUDE=" in seen["dump"], "Claude Code was running"
    assert "OPENED" not in seen["dump"], "another process opened Claude Code's /proc"
    assert '"apiKeyHelper"' in seen["dump"], "the agent directory was read"
    assert key not in seen["dump"]
    assert seen["agent"] == "[]"
    # The provider got the real key from the session's proxy, never from the writer.
    answered = messages.recorded("/v1/messages")
    assert answered and messages.last_auth.get("x-api-key") == key
    assert writer_containers(WRITER) == []
    assert files_holding(agent_dir, key) == []
    # Nothing reached the operator's checkout until the operator collects; `writer log`
    # shows the session's commit first (the clone's HEAD is the branch Claude Code made),
    # by the writer's identity, never the operator's.
    assert git(checkout, "branch", "--list", BRANCH) == ""
    log = run_cli("writer", "log", WRITER)
    mine = f" {WRITER} (writerpool): change by claude"
    assert log.code == 0 and log.out.rstrip().endswith(mine), log.out
    wp("writer", "collect", WRITER, "--apply", check=True)
    collected = git(checkout, "rev-parse", f"refs/remotes/writer-{WRITER}/{BRANCH}")
    assert log.out.startswith(collected[:12])
    assert git(checkout, "show", f"{collected}:claude.txt") == "changed by claude"
    assert git(checkout, "log", "-1", "--format=%s", collected) == "change by claude"
    client.assert_clean([key])


async def _read_only_session(client: Client) -> tuple[str, str]:
    """A session of the read-only Claude Code profile: a throwaway container with the
    checkout read-only; its turn reads a file and tries a write. Returns the turn's text
    and the session's id."""
    review = {"workspace": "boxed", "executionProfile": "claude-review"}
    looked = (await client.ok("pi_session_start", review))["session"]
    assert (looked["placement"], looked["agent"]) == ("readonly_container", "claude-code")
    sid = looked["sessionId"]
    assert f"writerpool-ro-{sid}" in podman_names()
    # The checkout is mounted read-only: a write from inside the container fails.
    with pytest.raises(subprocess.CalledProcessError):
        podman("exec", f"writerpool-ro-{sid}", "touch", "/work/probe.txt")
    body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": PEEK_PROMPT})
    turn = await client.wait_turn(sid, body["turnId"], limit=300)
    assert turn["status"] == "completed" and turn["toolCalls"] == 2, turn
    await client.ok("pi_session_close", {"sessionId": sid})
    return str(turn["text"]), sid


def podman_names() -> list[str]:
    return podman("ps", "-a", "--format", "{{.Names}}").split()


def test_an_aborted_turn_ends_aborted_and_a_killed_claude_fails_its_session_cleanly(
    tmp_path: Path, make_server: MakeServer, image_pin: Path, messages: ScriptedMessages
) -> None:
    server = claude_writer(tmp_path, make_server, messages.port)
    key = server.env[KEY_ENV]
    start = {"workspace": "boxed", "executionProfile": "claude"}

    async def scenario() -> Client:
        async with connect(server) as client:
            sid = (await client.ok("pi_session_start", start))["session"]["sessionId"]
            slow = {"sessionId": sid, "message": "take-your-time"}
            # An abort while the model's answer streams ends the turn `aborted`; the
            # session takes the next prompt.
            asked = len(messages.recorded("/v1/messages"))
            cut = await client.ok("pi_session_prompt", slow)
            with anyio.fail_after(120):
                while len(messages.recorded("/v1/messages")) == asked:
                    await anyio.sleep(0.1)
            aborted = await client.ok("pi_session_abort", {"sessionId": sid})
            assert aborted["aborted"] is True and aborted["turnId"] == cut["turnId"]
            turn = await client.wait_turn(sid, cut["turnId"], limit=120)
            assert (turn["status"], turn["text"]) == ("aborted", None), turn
            after = {"sessionId": sid, "message": AFTER_PROMPT}
            again = await client.ok("pi_session_prompt", after)
            turn = await client.wait_turn(sid, again["turnId"], limit=120)
            assert (turn["status"], turn["text"]) == ("completed", AFTER_TEXT), turn
            body = await client.ok("pi_session_prompt", slow)
            # Mid-turn (its answer streams for minutes), Claude Code is killed. The
            # container ends with it, which may end this exec first (Podman's 255).
            try:
                podman("exec", CONTAINER, "sh", "-c", KILL_CLAUDE)
            except subprocess.CalledProcessError as exc:
                assert exc.returncode == 255, exc.stderr
            turn = await client.wait_turn(sid, body["turnId"], limit=120)
            assert (turn["status"], turn["text"]) == ("failed", None), turn
            got = await client.ok("pi_session_get", {"sessionId": sid})
            assert got["session"]["state"] == "failed"
            prompt = {"sessionId": sid, "message": "say-hello"}
            assert await client.code("pi_session_prompt", prompt) == "session_failed"
            closed = await client.ok("pi_session_close", {"sessionId": sid})
            assert closed["session"]["state"] == "closed"
            assert writer_containers(WRITER) == []
            # The writer is free again: nothing was written, so the next session leases it.
            again = (await client.ok("pi_session_start", start))["session"]
            assert again["writer"] == WRITER
            await client.ok("pi_session_close", {"sessionId": again["sessionId"]})
            return client

    client = anyio.run(scenario)
    assert files_holding(server.paths.writer_dir(WRITER) / "agent", key) == []
    assert files_holding(server.paths.state_dir, key) == []
    client.assert_clean([key])
