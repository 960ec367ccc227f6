"""session_start per agent: pi, Claude Code and Codex, each through writerpool against
the same agent started the same way in a bare container, paired in one run.

Ours: `pi_session_start` of a coding profile naming the agent, through MCP on `writerpool
serve`, until the session is ready for a prompt (a leased writer, its guard, its
provider proxy and forwarder, the agent started and ready as its backend defines it).
Baseline: the backend's own container command and start (the same readiness) in
`podman run --rm -i` of the same image with only what the agent needs: keep-id, its
agent directory, a HOME on tmpfs, no network. "Ready" is the backend's: pi's first RPC
answer; Claude Code alive half a second after its exec (it says nothing before its first
prompt); Codex's driver's ready line (its `codex exec` starts with each turn, so neither
side starts codex itself). Each side's first start (the writer's first session after
provisioning inspects its clone) is kept apart as `firstStartSeconds`.

first_turn_<agent>: what a user waits for before the first answer, whatever "ready"
means to the agent: the same start, then a one-word turn to its end; the baseline's
container on the host's network, the agent pointed straight at the scripted provider.
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from bench_env import KEY_ENV, BenchEnv
from bench_figures import Figure
from bench_mcp import Client, connect

from writerpool.agent.backends import backend_for
from writerpool.agent.environment import pi_env
from writerpool.agent.launch import CONTAINER_SESSION_DIR
from writerpool.agent.scripted import Script, Step
from writerpool.agent.scripted_messages import ScriptedMessages
from writerpool.agent.scripted_responses import ScriptedResponses
from writerpool.config.models import load_config
from writerpool.config.providers import resolve_provider
from writerpool.pool.writer.container import AGENT_DIR
from writerpool.runtime.image import resolve_image
from writerpool.runtime.podman import podman_env
from writerpool.runtime.spec import AGENT_HOME

ALIAS = "agents"
# The profile of each agent, and the provider its API needs.
PROFILES = {"pi": "code", "claude-code": "claude", "codex": "codex"}
READY_SECONDS = 120.0
TURN_PROMPT = "say ok"
CONFIG = """
[profiles.claude]
permission = "coding"
agent = "claude-code"
provider = "messages"
model = "scripted-model"
thinking = "off"

[profiles.codex]
permission = "coding"
agent = "codex"
provider = "responses"
model = "scripted-model"
thinking = "off"

[providers.messages]
api = "anthropic-messages"
base_url = "http://127.0.0.1:{messages}"
api_key_env = "{key_env}"

[providers.responses]
api = "openai-responses"
base_url = "http://127.0.0.1:{responses}/v1"
api_key_env = "{key_env}"
"""


@contextmanager
def providers(env: BenchEnv) -> Iterator[None]:
    """The Messages and Responses providers of the claude and codex profiles, and the
    profiles themselves in the bench's configuration, while the run lasts."""
    script = Script(default=[Step(text="ok")])
    with ScriptedMessages(script) as messages, ScriptedResponses(script) as responses:
        env.extra_config.append(CONFIG.format(messages=messages.port,
                                              responses=responses.port, key_env=KEY_ENV))  # fmt: skip
        yield


def prepare(env: BenchEnv) -> None:
    """One writer serving the three profiles (sessions run one at a time)."""
    env.wp_ok("mode", "set", ALIAS, "container", "--profiles", ",".join(PROFILES.values()),
              "--writers", "1", "--apply")  # fmt: skip


def bare_start(env: BenchEnv, agent: str, root: Path, image_id: str, turn: bool) -> float:
    """The agent's backend starting its container command in a bare container, to ready;
    with `turn`, on the host's network straight to the provider, to the end of a first
    turn (the provider's one-word answer)."""
    config = load_config(env.paths).config
    profile = config.profiles[PROFILES[agent]]
    backend = backend_for(agent)
    agent_dir = root / f"bare-{agent}-{'turn' if turn else 'start'}" / "agent"
    if not agent_dir.exists():
        agent_dir.mkdir(parents=True)
        resolved = resolve_provider(config, profile.provider)
        assert resolved is not None
        backend.render(config, agent_dir, profile.provider, True)
        # Without a turn: where a session's forwarder would listen, asked nothing.
        url = resolved.base_url if turn else "http://127.0.0.1:9/v1"
        backend.point_at_proxy(agent_dir, resolved, url, "sk-bench-bare")
    command = backend.container_command(profile, False, AGENT_DIR, CONTAINER_SESSION_DIR)
    name = f"wp-bench-bare-{agent}-{secrets.token_hex(4)}"
    argv = ["podman", "run", "--rm", "-i", "--pull=never", "--name", name, "--userns=keep-id",
            "--network", "host" if turn else "none", "--tmpfs", f"{AGENT_HOME}:rw,mode=1777",
            "--env", f"HOME={AGENT_HOME}", "--workdir", "/tmp",
            "--mount", f"type=bind,src={agent_dir},dst={AGENT_DIR},ro=true",
            *[a for k, v in pi_env(AGENT_DIR, "none").items() for a in ("--env", f"{k}={v}")],
            image_id, *command]  # fmt: skip
    started = time.perf_counter()
    running = backend.start(argv, podman_env(), None, READY_SECONDS)
    try:
        if turn:
            done = running.wait(running.prompt(TURN_PROMPT), READY_SECONDS)
            if done.status != "completed":
                raise SystemExit(f"bench: bare {agent}'s first turn ended {done.status}")
        return time.perf_counter() - started
    finally:
        running.close(10.0)
        subprocess.run(["podman", "rm", "-f", "--ignore", name], env=podman_env(),
                       capture_output=True, timeout=120, check=False)  # fmt: skip


async def ours_sample(client: Client, agent: str, turn: bool) -> float:
    """pi_session_start to ready (with `turn`: to the end of a first turn), then close."""
    started = time.perf_counter()
    _, session = await client.start_session(ALIAS, PROFILES[agent])
    sid = session["sessionId"]
    if turn:
        body = await client.call("pi_session_prompt", {"sessionId": sid, "message": TURN_PROMPT})
        ask = {"sessionId": sid, "turnId": body["turnId"], "waitSeconds": 10}
        while (got := await client.call("pi_turn_get", ask))["turn"]["status"] == "running":
            pass  # each call waits up to 10 s for the turn's end
        if got["turn"]["status"] != "completed":
            raise SystemExit(f"bench: {agent}'s first turn ended {got['turn']['status']}")
    seconds = time.perf_counter() - started
    await client.close_session(sid)
    return seconds


def agent_line(figure: Figure) -> str:
    """What writerpool adds to the agent's own start, pair by pair."""
    added = statistics.median(o - b for o, b in zip(figure.ours, figure.baseline, strict=True))
    return f"  paired median {figure.paired_ratio():.2f}; writerpool adds {added:.3f} s (paired median)"


def _figures(agent: str) -> tuple[Figure, Figure]:
    start = Figure(f"session_start_{agent}", goal=1.2,
                   ours_label=f"pi_session_start of a {agent} profile through MCP to the agent "
                   "ready in a leased writer",
                   baseline_label=f"the {agent} backend's command started in podman run --rm "
                   "-i (keep-id, its agent directory) to ready")  # fmt: skip
    turn = Figure(f"first_turn_{agent}",
                  ours_label="the same start, then a one-word first turn through the "
                  "session's forwarder and provider proxy, to the turn's end",
                  baseline_label="the same bare container on the host's network, straight "
                  "to the provider, to the first turn's end")  # fmt: skip
    return start, turn


async def agent_figures(env: BenchEnv, reps: int) -> list[Figure]:
    """session_start_<agent> and first_turn_<agent> for each agent, the sides alternating
    as in interleave()."""
    image_id = resolve_image(env.paths, "default")
    figures = {agent: _figures(agent) for agent in PROFILES}
    every = [f for pair in figures.values() for f in pair]
    scratch = env.root / "bare-agents"
    async with connect(env.server_env(), env.root, env.root / "serve-agents.log") as client:
        for agent, (start, _) in figures.items():  # each side's first start, kept apart
            first = await ours_sample(client, agent, False)
            bare = await anyio.to_thread.run_sync(bare_start, env, agent, scratch, image_id, False)
            start.extra["firstStartSeconds"] = {"ours": first, "baseline": bare}
        for figure in every:
            figure.load.append(list(os.getloadavg()))
        for rep in range(reps):
            for agent, pair in figures.items():
                for figure, turn in zip(pair, (False, True), strict=True):

                    async def ours(a: str = agent, f: Figure = figure, t: bool = turn) -> None:
                        f.ours.append(await ours_sample(client, a, t))

                    async def base(a: str = agent, f: Figure = figure, t: bool = turn) -> None:
                        f.baseline.append(await anyio.to_thread.run_sync(
                            bare_start, env, a, scratch, image_id, t))  # fmt: skip

                    for side in (ours, base) if rep % 2 == 0 else (base, ours):
                        await side()
        for figure in every:
            figure.load.append(list(os.getloadavg()))
    return every
