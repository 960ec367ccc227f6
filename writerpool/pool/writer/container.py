"""The container a writer runs in: one spec for sessions, acceptance and inspection."""

from __future__ import annotations

from pathlib import Path

from writerpool.agent.environment import CACHE_ENV, pi_env

# Defined with pi's environment (the proxy's socket with the hosts that mount it);
# re-exported for the pool and the launcher.
from writerpool.agent.environment import CONNECT_SOCKET as CONNECT_SOCKET  # noqa: PLC0414
from writerpool.agent.environment import EGRESS_CA as EGRESS_CA  # noqa: PLC0414
from writerpool.agent.environment import EGRESS_PORT as EGRESS_PORT  # noqa: PLC0414
from writerpool.config.models import Pool
from writerpool.config.modes import load_modes
from writerpool.config.network import network_info
from writerpool.config.paths import Paths
from writerpool.runtime.host import EGRESS_DIR, EngineFacts, Writer, WriterHost, writer_at
from writerpool.runtime.host import EGRESS_SOCKET as EGRESS_SOCKET  # noqa: PLC0414
from writerpool.runtime.image import image_setting_id
from writerpool.runtime.spec import (
    LABEL_CONTROLLER,
    LABEL_ROLE,
    LABEL_SESSION,
    LABEL_SETTINGS,
    LABEL_WORKSPACE,
    LABEL_WRITER,
    ContainerSpec,
    Limits,
    Mount,
    by_kind,
)
from writerpool.state.writer import WriterState

AGENT_DIR = "/pi/agent"


def writer_of(paths: Paths, state: WriterState) -> Writer:
    return writer_at(paths, state.name, state.host)


def writer_spec(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    image_id: str,
    pool: Pool,
    facts: EngineFacts,
    role: str = "session",
    allow: bool = False,
) -> ContainerSpec:
    """The exact container of a session on this writer, on its host: every mount is the
    host's (WriterHost.storage_mount, egress_mount), so this spec is the one that runs
    there, and acceptance runs and digests the very same one."""
    writer = writer_of(paths, state)
    mounts = [
        host.storage_mount(writer, "clone", "/work"),
        # .git as a mount point of its own: it cannot be renamed away from the read-only
        # config and hooks below and rebuilt with a hook of the agent's.
        host.storage_mount(writer, "clone", "/work/.git", sub_path=".git"),
        # The agent must not plant executable git settings or hooks.
        host.storage_mount(
            writer, "clone", "/work/.git/config", sub_path=".git/config", read_only=True
        ),
        host.storage_mount(
            writer, "clone", "/work/.git/hooks", sub_path=".git/hooks", read_only=True
        ),
        # Read-only: the agent cannot leave settings or a redirected endpoint behind for
        # the next session; writerpool renders it before each session.
        host.storage_mount(writer, "agent", AGENT_DIR, read_only=True),
    ]
    cache = state.cache if state.cache in CACHE_ENV else None
    if cache is not None:
        mounts.append(host.storage_mount(writer, "cache", f"/pi/{cache}"))
    if network_info(state.network).egress:
        mounts.append(host.egress_mount(writer))
    env = pi_env(AGENT_DIR, state.network, writer=state.name, cache=cache, allow=allow)
    binds, volumes = by_kind(mounts)
    return ContainerSpec(
        image_id=image_id,
        name=f"writerpool-{state.name}",
        labels={
            LABEL_WRITER: state.name,
            LABEL_CONTROLLER: writer.controller,
            LABEL_WORKSPACE: state.alias,
            LABEL_SETTINGS: state.settings_digest,
            LABEL_ROLE: role,
        },
        mounts=binds,
        volumes=volumes,
        env=env,
        network=network_info(state.network).podman,
        limits=pool_limits(pool, facts),
    )


def has_allowlist(paths: Paths, state: WriterState) -> bool:
    """Whether the writer's workspace has an egress allowlist (its sessions get the
    allowlist proxy and the proxy variables)."""
    entry = load_modes(paths).workspaces.get(state.alias)
    return bool(entry and entry.container and entry.container.allow)


def session_spec(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    pool: Pool,
    image_id: str | None = None,
    facts: EngineFacts | None = None,
) -> ContainerSpec:
    """The container every session of the writer gets on its host: what a session runs,
    what acceptance runs the harness in, and what the fingerprint digests. Its image is
    checked present there and its limits follow the host's facts, unless both are given
    (a warm writer's, known since it started: no Podman call)."""
    image_id = image_id or writer_image(paths, host, state.image)
    facts = facts or host.facts()
    return writer_spec(paths, host, state, image_id, pool, facts,
                       allow=has_allowlist(paths, state))  # fmt: skip


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
            # Read-only: the agent may connect to the socket, never replace it.
            Mount(source=egress_dir, target=EGRESS_DIR, read_only=True),
        ),
        env=pi_env(AGENT_DIR, "provider"),
        network="none",
        limits=pool_limits(pool, facts),
    )
