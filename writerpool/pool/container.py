"""The container a writer runs in: one spec for sessions, acceptance and inspection."""

from __future__ import annotations

from pathlib import Path

from writerpool.agent.environment import CACHE_ENV, EGRESS_DIR, pi_env

# Defined with pi's environment; re-exported for the pool and the launcher.
from writerpool.agent.environment import CONNECT_SOCKET as CONNECT_SOCKET  # noqa: PLC0414
from writerpool.agent.environment import EGRESS_CA as EGRESS_CA  # noqa: PLC0414
from writerpool.agent.environment import EGRESS_PORT as EGRESS_PORT  # noqa: PLC0414
from writerpool.agent.environment import EGRESS_SOCKET as EGRESS_SOCKET  # noqa: PLC0414
from writerpool.config.models import Pool
from writerpool.config.network import network_info
from writerpool.config.paths import Paths
from writerpool.runtime.host import EngineFacts, Writer, WriterHost, writer_at
from writerpool.runtime.image import image_setting_id
from writerpool.runtime.spec import (
    LABEL_ROLE,
    LABEL_SESSION,
    LABEL_SETTINGS,
    LABEL_WORKSPACE,
    LABEL_WRITER,
    ContainerSpec,
    Limits,
    Mount,
)
from writerpool.state.writer import WriterState

AGENT_DIR = "/pi/agent"


def writer_of(paths: Paths, state: WriterState) -> Writer:
    return writer_at(paths, state.name, state.host)


def writer_spec(
    paths: Paths,
    state: WriterState,
    image_id: str,
    pool: Pool,
    facts: EngineFacts,
    role: str = "session",
    allow: bool = False,
) -> ContainerSpec:
    """The exact container of a session on this writer (acceptance reuses it)."""
    writer = writer_of(paths, state)
    clone = writer.clone
    mounts = [
        Mount(source=clone, target="/work"),
        # .git as a mount point of its own: it cannot be renamed away from the read-only
        # config and hooks below and rebuilt with a hook of the agent's.
        Mount(source=clone / ".git", target="/work/.git"),
        # The agent must not plant executable git settings or hooks.
        Mount(source=clone / ".git" / "config", target="/work/.git/config", read_only=True),
        Mount(source=clone / ".git" / "hooks", target="/work/.git/hooks", read_only=True),
        # Read-only: the agent cannot leave settings or a redirected endpoint behind for
        # the next session; writerpool renders it before each session.
        Mount(source=writer.agent, target=AGENT_DIR, read_only=True),
    ]
    cache = state.cache if state.cache in CACHE_ENV else None
    if cache is not None:
        mounts.append(Mount(source=writer.cache, target=f"/pi/{cache}"))
    if network_info(state.network).egress:
        mounts.append(egress_mount(writer.egress))
    env = pi_env(AGENT_DIR, state.network, writer=state.name, cache=cache, allow=allow)
    return ContainerSpec(
        image_id=image_id,
        name=f"writerpool-{state.name}",
        labels={
            LABEL_WRITER: state.name,
            LABEL_WORKSPACE: state.alias,
            LABEL_SETTINGS: state.settings_digest,
            LABEL_ROLE: role,
        },
        mounts=tuple(mounts),
        env=env,
        network=network_info(state.network).podman,
        limits=pool_limits(pool, facts),
    )


def egress_mount(egress_dir: Path) -> Mount:
    # Read-only: the agent may connect to the socket, never replace it.
    return Mount(source=egress_dir, target=EGRESS_DIR, read_only=True)


def writer_image(paths: Paths, host: WriterHost, setting: str) -> str:
    """The image ID a setting names ("default": the pin), present on `host`."""
    image_id = image_setting_id(paths, setting)
    host.ensure_image(image_id)
    return image_id


def pool_limits(pool: Pool, facts: EngineFacts) -> Limits | None:
    # Where the host cannot enforce them, none are passed (doctor warns: cgroup_limits).
    if not facts.limits:
        return None
    return Limits(memory=pool.memory, cpus=pool.cpus, pids=pool.pids)


def readonly_spec(
    *,
    image_id: str,
    session_id: str,
    checkout: Path,
    agent_dir: Path,
    egress_dir: Path,
    pool: Pool,
    facts: EngineFacts,
) -> ContainerSpec:
    """A read-only session's throwaway container: the operator's checkout read-only at
    /work (its .git included), the session's agent directory, the proxy socket, and
    nothing else of the host; the same flags as a writer's."""
    return ContainerSpec(
        image_id=image_id,
        name=f"writerpool-ro-{session_id}",
        labels={LABEL_ROLE: "readonly", LABEL_SESSION: session_id},
        mounts=(
            Mount(source=checkout, target="/work", read_only=True),
            Mount(source=agent_dir, target=AGENT_DIR, read_only=True),
            egress_mount(egress_dir),
        ),
        env=pi_env(AGENT_DIR, "provider"),
        network="none",
        limits=pool_limits(pool, facts),
    )
