"""Each agent a writer's profiles use, as acceptance renders it: its backend's directory,
pointed at the session's proxy with the canary as the key behind it (egress.py, as a
session renders it), and the command its backend gives it; the harness checks both
inside the writer's container (payload/harness/agents.py). The set of agents is part of
the acceptance fingerprint: a profile whose agent changes makes the verdict stale."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path

from writerpool.agent.backends import BACKENDS, backend_for
from writerpool.agent.egress import EgressRequest, grant_key, render_beside
from writerpool.agent.launch import CONTAINER_SESSION_DIR
from writerpool.config.models import Config, Profile, Provider
from writerpool.config.network import network_info
from writerpool.config.providers import resolve_provider
from writerpool.pool.writer.container import AGENT_DIR, EGRESS_PORT
from writerpool.runtime.host import Writer, WriterHost
from writerpool.state.writer import WriterState

# The agent whose directory acceptance renders when no profile of the writer names one.
DEFAULT_AGENT = "pi"
# A provider that leads nowhere (the discard port on loopback): the control's, whose
# harness has no proxy to send a request through.
DEAD_UPSTREAM = "http://127.0.0.1:9/v1"
CONTROL_PROVIDER = "control"


def profile_agents(config: Config, profiles: tuple[str, ...]) -> dict[str, Profile]:
    """Each distinct agent of these profiles, with the first profile that names it."""
    found: dict[str, Profile] = {}
    for name in profiles:
        profile = config.profiles.get(name)
        if profile is not None:
            found.setdefault(profile.agent, profile)
    return dict(sorted(found.items()))


def agents_digest(config: Config, profiles: tuple[str, ...]) -> str:
    """The fingerprint's group: the agents acceptance checks for these profiles."""
    return ",".join(profile_agents(config, profiles)) or DEFAULT_AGENT


def agent_commands(agents: dict[str, Profile]) -> str:
    """The harness's WRITERPOOL_HARNESS_AGENTS: each agent's command as a session's
    container runs it (its environment included, by `env`)."""
    commands = {
        name: backend_for(name).container_command(profile, False, AGENT_DIR, CONTAINER_SESSION_DIR)
        for name, profile in agents.items()
    }
    return json.dumps(commands, sort_keys=True)


@contextlib.contextmanager
def canary_granted(
    host: WriterHost, writer: Writer, state: WriterState, config: Config, provider: str,
    agents: dict[str, Profile], allow: tuple[str, ...] | None,
) -> Iterator[str]:  # fmt: skip
    """A canary credential, which this yields, sent through the session's real egress
    path (the proxy, its token in the agent directory rendered through the host for each
    agent, its socket where the host's egress endpoint leads) for the block."""
    resolved = resolve_provider(config, provider)
    assert resolved is not None
    canary = "wp" + "canary-" + secrets.token_hex(16)
    names = list(agents) or [DEFAULT_AGENT]
    with contextlib.ExitStack() as stack:
        egress = None
        if network_info(state.network).egress:
            # Loaded only for a network with egress: the others start no egress process.
            from writerpool.egress.supervisor import EgressSupervisor  # noqa: PLC0415

            egress = EgressSupervisor()
            stack.callback(egress.close)
        with host.agent_dir(writer) as agent_dir:
            request = EgressRequest(
                config=config, provider=provider, network=state.network,
                agent_dir=agent_dir, egress_dir=writer.record.egress, session="acceptance",
                writer=state.name, port=EGRESS_PORT, allow=allow, agent=names[0],
            )  # fmt: skip
            held = grant_key(request, egress, resolved, canary)
            stack.callback(held.revoke)
            for name in names[1:]:
                render_beside(dataclasses.replace(request, agent=name), held, resolved, canary)
        held.ready()
        yield canary


def reached_provider(arrived: list[tuple[bytes, bytes]], canary: str) -> set[str]:
    """The agents whose request reached acceptance's provider with the canary as its key
    (the harness names the agent as its request's `input`): only the proxy can put the
    canary there, since no agent holds it."""
    reached = set()
    for auth, body in arrived:
        if auth != f"Bearer {canary}".encode():
            continue
        try:
            document = json.loads(body)
        except ValueError:
            continue
        if isinstance(document, dict) and isinstance(document.get("input"), str):
            reached.add(document["input"])
    return reached


def given_directly(key: str) -> dict[str, str]:
    """The isolation control's agent inputs: every backend's directory rendered with
    `key` given to the agent itself (as a network that is not limited gives it), its
    files as text (WRITERPOOL_HARNESS_AGENT_FILES: the harness writes them where it
    runs, on any host) and each agent's command; every `agent_*_key_absent` must fail."""
    provider = Provider(base_url=DEAD_UPSTREAM, api="openai-responses")
    profiles = {
        name: Profile.model_validate(
            {"permission": "coding", "agent": name, "provider": CONTROL_PROVIDER, "model": "m"}
        )
        for name in BACKENDS
    }
    config = Config(providers={CONTROL_PROVIDER: provider})
    with tempfile.TemporaryDirectory(prefix="wp-agents-") as tmp:
        root = Path(tmp)
        for name in BACKENDS:
            backend = backend_for(name)
            backend.render(config, root, CONTROL_PROVIDER, True)
            backend.install_credential(root, CONTROL_PROVIDER, key)
        files = {
            str(p.relative_to(root)): p.read_text("utf-8", "replace")
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
    return {
        "WRITERPOOL_HARNESS_AGENT_FILES": json.dumps(files, sort_keys=True),
        "WRITERPOOL_HARNESS_AGENTS": agent_commands(profiles),
    }
