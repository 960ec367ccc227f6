"""A Codex session in a container workspace: a real MCP client, `writerpool serve`, a
leased writer on real rootless Podman, the image's `codex` in it on the scripted
OpenAI Responses provider (through the session's provider proxy), one `codex exec`
process per turn; the commit it made is collected as a review ref."""

from __future__ import annotations

import json
import os
import pwd
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import KEY_ENV, SERVER_ENV_VARS
from tests.e2e.harness import Client, ServerEnv, connect, files_holding
from tests.e2e.pool_support import GIT_ID, containers_of, result_value, unique_alias
from tests.integration.writers_support import codes, git, make_checkout, wp
from tests.support.cli import run_cli
from writerpool.agent.scripted import Script, ScriptEntry, Step, ToolCall
from writerpool.agent.scripted_responses import ScriptedResponses
from writerpool.config.paths import Paths

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

TURN_LIMIT = 300
COMMIT_PROMPT = "codex-commit: the plan is heron-2718"
NEXT_PROMPT = "codex-look: what did you commit?"
BRANCH = "codex-work"
NEXT_TEXT = "The commit is on codex-work."
SLOW_PROMPT = "codex-slow: take your time"
AFTER_PROMPT = "codex-after: still there?"
AFTER_TEXT = "Still here after the abort."
PEEK_PROMPT = "codex-peek: read only"
PEEK = 'echo "subject=$(git log -1 --format=%s)"; touch probe.txt; echo "write-exit=$?"'
COMMIT = (
    f"echo 'made by codex' > feature.txt && git switch -q -c {BRANCH} && "
    f"git add feature.txt && git {GIT_ID} commit -q -m 'feature from codex' && "
    'echo "commit=$(git rev-parse HEAD)"; '
    # Codex's own sandbox: the command may write the clone (.git too) and /tmp, never
    # Codex's home, where its config and threads are.
    'touch "$HOME/.codex/planted"; echo "home-exit=$?"; touch /tmp/scratch; echo "tmp-exit=$?"; '
    # The token reaches Codex in its environment; the commands it runs do not inherit it.
    'echo "token-var=${WRITERPOOL_SESSION_TOKEN:-unset}"'
)
SCRIPT = Script(
    scripts=[
        ScriptEntry(
            match="codex-commit",
            steps=[
                Step(tool_calls=[ToolCall(name="bash", arguments={"command": COMMIT})]),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(match="codex-look", steps=[Step(text=NEXT_TEXT)]),
        ScriptEntry(match="codex-slow", steps=[Step(text="never seen", delay_seconds=300)]),
        ScriptEntry(match="codex-after", steps=[Step(text=AFTER_TEXT)]),
        ScriptEntry(
            match="codex-peek",
            steps=[
                Step(tool_calls=[ToolCall(name="bash", arguments={"command": PEEK})]),
                Step(text="{tool_results}"),
            ],
        ),
    ],
    default=[Step(text="default answer")],
)


@pytest.fixture
def provider() -> Iterator[ScriptedResponses]:
    with ScriptedResponses(SCRIPT) as scripted:
        yield scripted


def _config_text(alias: str, checkout: Path, port: int) -> str:
    return f"""\
[workspaces]
{alias} = "{checkout}"

[profiles.review]
permission = "read-only"
provider = "scripted"
model = "scripted-model"
default = true

[profiles.codex]
permission = "coding"
agent = "codex"
provider = "scripted"
model = "scripted-model"
thinking = "off"

[profiles.codex-review]
permission = "read-only"
agent = "codex"
provider = "scripted"
model = "scripted-model"

[providers.scripted]
base_url = "http://127.0.0.1:{port}/v1"
api = "openai-responses"
api_key_env = "{KEY_ENV}"

[pool]
session_close_seconds = 10
"""


async def run_turn(client: Client, sid: str, message: str) -> dict[str, Any]:
    body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": message})
    return await client.wait_turn(sid, body["turnId"], limit=TURN_LIMIT)


def codex_writer(tmp_path: Path, port: int) -> tuple[ServerEnv, str]:
    """A server (and its workspace alias) whose container workspace has one accepted
    writer for the codex profile (the isolation control recorded first)."""
    alias = unique_alias("codex")
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(_config_text(alias, checkout, port))
    wp("control", "--apply", check=True)
    wp("mode", "set", alias, "container", "--profiles", "codex", "--apply", check=True)
    key = "sk-scripted-" + secrets.token_hex(12)
    env = {k: os.environ[k] for k in SERVER_ENV_VARS if k in os.environ}
    env[KEY_ENV] = key
    return ServerEnv(tmp_path, env, paths, {alias: checkout}, [key, str(tmp_path)]), alias


def test_a_codex_session_commits_in_its_writer_and_collect_imports_it(
    tmp_path: Path, provider: ScriptedResponses, image_pin: Path
) -> None:
    server, alias = codex_writer(tmp_path, provider.port)
    # Codex starts a process per turn: nothing to warm, so --warm is refused.
    code, report = wp("mode", "set", alias, "container", "--profiles", "codex", "--warm", "1",
                      "--apply")  # fmt: skip
    assert code != 0 and "warm_agent_unsupported" in codes(report), report
    checkout, key, paths = server.workspaces[alias], server.env[KEY_ENV], server.paths
    name = f"{alias}-w1"
    agent_dir = paths.writer_dir(name) / "agent"
    main_commit = git(checkout, "rev-parse", "refs/heads/main")

    async def scenario() -> tuple[Client, list[dict[str, Any]]]:
        async with connect(server) as client:
            start = {"workspace": alias, "executionProfile": "codex"}
            session = (await client.ok("pi_session_start", start))["session"]
            assert session["writer"] == name and session["agent"] == "codex"
            sid = session["sessionId"]
            # The writer holds the session's token, never the key.
            assert files_holding(agent_dir, key) == []
            assert (agent_dir / "codex" / "key").exists()
            committed = await run_turn(client, sid, COMMIT_PROMPT)
            following = await run_turn(client, sid, NEXT_PROMPT)
            # An abort interrupts the turn's process while its model call streams; the
            # next turn's process resumes the thread.
            asked = len(provider.recorded("/v1/responses"))
            slow = await client.ok("pi_session_prompt", {"sessionId": sid, "message": SLOW_PROMPT})
            with anyio.fail_after(TURN_LIMIT):
                while len(provider.recorded("/v1/responses")) == asked:
                    await anyio.sleep(0.1)
            aborted = await client.ok("pi_session_abort", {"sessionId": sid})
            assert aborted["aborted"] is True and aborted["turnId"] == slow["turnId"]
            cut = await client.wait_turn(sid, slow["turnId"], limit=TURN_LIMIT)
            after = await run_turn(client, sid, AFTER_PROMPT)
            await client.ok("pi_session_close", {"sessionId": sid})
            # A read-only codex profile: a throwaway container, the checkout read-only.
            review = {"workspace": alias, "executionProfile": "codex-review"}
            looked = (await client.ok("pi_session_start", review))["session"]
            assert looked["placement"] == "readonly_container" and looked["agent"] == "codex"
            peek = await run_turn(client, looked["sessionId"], PEEK_PROMPT)
            await client.ok("pi_session_close", {"sessionId": looked["sessionId"]})
            return client, [committed, following, cut, after, peek]

    client, (committed, following, cut, after, peek) = anyio.run(scenario)
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    client.assert_clean([*server.secrets, real_home, "heron-2718"])
    assert (committed["status"], committed["stopReason"]) == ("completed", "stop"), committed
    assert committed["toolCalls"] == 1, committed
    commit = result_value(committed["text"], "commit")
    assert result_value(committed["text"], "home-exit") != "0"
    assert result_value(committed["text"], "tmp-exit") == "0"
    assert result_value(committed["text"], "token-var") == "unset"
    assert following["status"] == "completed" and following["text"] == NEXT_TEXT
    assert cut["status"] == "aborted" and cut["text"] is None
    assert after["status"] == "completed" and after["text"] == AFTER_TEXT
    assert peek["status"] == "completed", peek
    assert result_value(peek["text"], "subject") == git(checkout, "log", "-1", "--format=%s")
    assert result_value(peek["text"], "write-exit") != "0"
    assert not (checkout / "probe.txt").exists()
    # Every request went through the session's proxy, which sent the real key.
    requests = provider.recorded("/v1/responses")
    assert len(requests) >= 5  # the command, its result, and one for each later turn
    assert {r.headers.get("authorization") for r in requests} == {f"Bearer {key}"}
    # Codex 0.171 names its thread, its sandbox and how the turn's history began in each
    # request: each later turn's process resumed the first one's thread.
    meta = [json.loads(r.headers["x-codex-turn-metadata"]) for r in requests]
    # The coding session's in Codex's workspace-write sandbox, the read-only one's in its
    # read-only sandbox.
    coding = [m for m in meta if m["sandbox_mode"] == "workspace-write"]
    reading = [m for m in meta if m["sandbox_mode"] == "read-only"]
    assert len(coding) + len(reading) == len(meta) and reading
    assert len({m["thread_id"] for m in coding}) == 1
    assert coding[-1]["history_initialization"] == "cold_resume"
    assert {m["thread_id"] for m in reading}.isdisjoint(m["thread_id"] for m in coding)
    assert {m["analytics_enabled"] for m in meta} == {False}
    # Each profile's thinking: off (`none` to Codex), and the default, medium.
    assert {m["reasoning_effort"] for m in coding} == {"none"}
    assert {m["reasoning_effort"] for m in reading} == {"medium"}
    assert files_holding(agent_dir, key) == [] and not (agent_dir / "codex" / "key").exists()
    assert containers_of(name) == []

    # `writer log` shows the session's commit before anything is collected (the clone's
    # HEAD is the branch Codex made), by the writer's identity, never the operator's.
    log = run_cli("writer", "log", name)
    assert log.code == 0 and log.out.startswith(commit[:12]), log.out
    assert log.out.rstrip().endswith(f" {name} (writerpool): feature from codex"), log.out
    code, report = wp("writer", "collect", name, "--apply")
    assert code == 0 and "writer_collected" in codes(report), report
    ref = f"refs/remotes/writer-{name}/{BRANCH}"
    assert git(checkout, "rev-parse", ref) == commit
    assert git(checkout, "log", "-1", "--format=%s", ref) == "feature from codex"
    assert git(checkout, "rev-parse", "refs/heads/main") == main_commit
    assert not (checkout / "feature.txt").exists()
