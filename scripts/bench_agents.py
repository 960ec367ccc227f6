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
from bench_mcp import connect

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


def bare_start(env: BenchEnv, agent: str, root: Path, image_id: str) -> float:
    """The agent's backend starting its container command in a bare container, to ready."""
    config = load_config(env.paths).config
    profile_name = PROFILES[agent]
    profile = config.profiles[profile_name]
    backend = backend_for(agent)
    agent_dir = root / f"bare-{agent}" / "agent"
    if not agent_dir.exists():
        agent_dir.mkdir(parents=True)
        resolved = resolve_provider(config, profile.provider)
        assert resolved is not None
        backend.render(config, agent_dir, profile.provider, True)
        # Where a session's forwarder would listen; nothing is asked of it before a prompt.
        backend.point_at_proxy(agent_dir, resolved, "http://127.0.0.1:9/v1", "bench-token")
    command = backend.container_command(profile, False, AGENT_DIR, CONTAINER_SESSION_DIR)
    name = f"wp-bench-bare-{agent}-{secrets.token_hex(4)}"
    argv = ["podman", "run", "--rm", "-i", "--pull=never", "--name", name, "--userns=keep-id",
            "--network", "none", "--tmpfs", f"{AGENT_HOME}:rw,mode=1777",
            "--env", f"HOME={AGENT_HOME}",
            "--mount", f"type=bind,src={agent_dir},dst={AGENT_DIR},ro=true",
            *[a for k, v in pi_env(AGENT_DIR, "none").items() for a in ("--env", f"{k}={v}")],
            image_id, *command]  # fmt: skip
    started = time.perf_counter()
    running = backend.start(argv, podman_env(), None, READY_SECONDS)
    seconds = time.perf_counter() - started
    running.close(10.0)
    subprocess.run(["podman", "rm", "-f", "--ignore", name], env=podman_env(),
                   capture_output=True, timeout=120, check=False)  # fmt: skip
    return seconds


def agent_line(figure: Figure) -> str:
    """What writerpool adds to the agent's own start, pair by pair."""
    added = statistics.median(o - b for o, b in zip(figure.ours, figure.baseline, strict=True))
    return f"  paired median {figure.paired_ratio():.2f}; writerpool adds {added:.3f} s (paired median)"


async def agent_figures(env: BenchEnv, reps: int) -> list[Figure]:
    """session_start_<agent> for each agent, the sides alternating as in interleave()."""
    image_id = resolve_image(env.paths, "default")
    figures = {
        agent: Figure(
            f"session_start_{agent}",
            goal=1.2,
            ours_label=f"pi_session_start of a {agent} profile through MCP to the agent "
            "ready in a leased writer",
            baseline_label=f"the {agent} backend's command started in podman run --rm -i "
            "(keep-id, its agent directory) to ready",
        )
        for agent in PROFILES
    }
    scratch = env.root / "bare-agents"
    async with connect(env.server_env(), env.root, env.root / "serve-agents.log") as client:
        for agent, figure in figures.items():  # each side's first start, kept apart
            seconds, session = await client.start_session(ALIAS, PROFILES[agent])
            await client.close_session(session["sessionId"])
            first = await anyio.to_thread.run_sync(bare_start, env, agent, scratch, image_id)
            figure.extra["firstStartSeconds"] = {"ours": seconds, "baseline": first}
        for figure in figures.values():
            figure.load.append(list(os.getloadavg()))
        for rep in range(reps):
            for agent, figure in figures.items():

                async def ours(agent: str = agent, figure: Figure = figure) -> None:
                    seconds, session = await client.start_session(ALIAS, PROFILES[agent])
                    figure.ours.append(seconds)
                    await client.close_session(session["sessionId"])

                async def base(agent: str = agent, figure: Figure = figure) -> None:
                    figure.baseline.append(await anyio.to_thread.run_sync(
                        bare_start, env, agent, scratch, image_id))  # fmt: skip

                for side in (ours, base) if rep % 2 == 0 else (base, ours):
                    await side()
        for figure in figures.values():
            figure.load.append(list(os.getloadavg()))
    return list(figures.values())
