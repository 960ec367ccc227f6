"""The container a writer runs in: one spec for sessions, acceptance and inspection."""

from __future__ import annotations

from pathlib import Path

from writerpool.agent.compact import node_options
from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.runtime.spec import (
    LABEL_ROLE,
    LABEL_SETTINGS,
    LABEL_WORKSPACE,
    LABEL_WRITER,
    ContainerSpec,
    Limits,
    Mount,
)
from writerpool.state.writer import WriterState

AGENT_DIR = "/pi/agent"
CACHE_ENV = {
    "go": {"GOPATH": "/pi/go", "GOCACHE": "/pi/go/cache", "GOTOOLCHAIN": "local"},
    "uv": {"UV_CACHE_DIR": "/pi/uv/cache", "npm_config_cache": "/pi/uv/npm"},
}


def writer_layout(paths: Paths, name: str) -> dict[str, Path]:
    root = paths.writer_dir(name)
    return {
        "root": root,
        "clone": root / "clone",
        "agent": root / "agent",
        "cache": root / "cache",
        "collections": root / "collections",
    }


def limits_supported() -> bool:
    # Rootless limits need the unified cgroup v2 hierarchy with delegated controllers.
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def writer_spec(
    paths: Paths, state: WriterState, image_id: str, pool: Pool, role: str = "session"
) -> ContainerSpec:
    """The exact container of a session on this writer (acceptance reuses it)."""
    lay = writer_layout(paths, state.name)
    clone = lay["clone"]
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
        Mount(source=lay["agent"], target=AGENT_DIR, read_only=True),
    ]
    # Commits made in a writer name the writer, never the operator.
    identity = {
        f"GIT_{who}_{field}": value
        for who in ("AUTHOR", "COMMITTER")
        for field, value in (
            ("NAME", f"{state.name} (writerpool)"),
            ("EMAIL", f"{state.name}@writerpool.invalid"),
        )
    }
    env = {
        "PI_CODING_AGENT_DIR": AGENT_DIR,
        "NODE_OPTIONS": node_options(AGENT_DIR),  # pi's RPC output stays linear
        "GIT_CONFIG_NOSYSTEM": "1",
        **identity,
    }
    if state.cache in CACHE_ENV:
        mounts.append(Mount(source=lay["cache"], target=f"/pi/{state.cache}"))
        env.update(CACHE_ENV[state.cache])
    limits = (
        Limits(memory=pool.memory, cpus=pool.cpus, pids=pool.pids) if limits_supported() else None
    )
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
        network=state.network,
        limits=limits,
    )
