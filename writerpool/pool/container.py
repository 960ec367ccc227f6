"""The container a writer runs in: one spec for sessions, acceptance and inspection."""

from __future__ import annotations

from pathlib import Path

from writerpool.agent.compact import node_options
from writerpool.config.models import Pool
from writerpool.config.network import network_info
from writerpool.config.paths import Paths
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
# The provider proxy's socket directory, and the loopback port the image's forwarder
# (images/egress-forwarder, started by pi's launcher) relays to it.
EGRESS_DIR = "/pi/egress"
EGRESS_SOCKET = "proxy.sock"
EGRESS_PORT = 41480
# The allowlist proxy (`mode set --allow`): its socket beside the provider proxy's, the
# forwarder's second port, and the host's public certificates the writer's tools trust.
CONNECT_SOCKET = "connect.sock"
CONNECT_PORT = 41481
EGRESS_CA = "ca.pem"
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
        "egress": root / "egress",
        "collections": root / "collections",
    }


def limits_supported() -> bool:
    # Rootless limits need the unified cgroup v2 hierarchy with delegated controllers.
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def writer_spec(
    paths: Paths,
    state: WriterState,
    image_id: str,
    pool: Pool,
    role: str = "session",
    allow: bool = False,
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
    if network_info(state.network).egress:
        mounts.append(egress_mount(lay["egress"]))
        env.update(EGRESS_ENV)
        if allow:
            env.update(ALLOW_ENV)
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
        limits=pool_limits(pool),
    )


EGRESS_ENV = {
    "WRITERPOOL_EGRESS_SOCKET": f"{EGRESS_DIR}/{EGRESS_SOCKET}",
    "WRITERPOOL_EGRESS_PORT": str(EGRESS_PORT),
}


_PROXY = f"http://127.0.0.1:{CONNECT_PORT}"
_CA = f"{EGRESS_DIR}/{EGRESS_CA}"
# Set only in writers whose workspace has an allowlist: the usual proxy variables (both
# cases; git, pip, uv and npm read them), loopback exempt (pi's provider forwarder), and
# the host's public certificates for every tool that verifies TLS on its own.
ALLOW_ENV = {
    "WRITERPOOL_CONNECT_SOCKET": f"{EGRESS_DIR}/{CONNECT_SOCKET}",
    "WRITERPOOL_CONNECT_PORT": str(CONNECT_PORT),
    **{name: _PROXY for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")},
    **{name: "127.0.0.1,localhost,::1" for name in ("NO_PROXY", "no_proxy")},
    "npm_config_proxy": _PROXY,
    "npm_config_https_proxy": _PROXY,
    "npm_config_cafile": _CA,
    "SSL_CERT_FILE": _CA,
    "REQUESTS_CA_BUNDLE": _CA,
    "PIP_CERT": _CA,
    "NODE_EXTRA_CA_CERTS": _CA,
    "GIT_SSL_CAINFO": _CA,
}


def egress_mount(egress_dir: Path) -> Mount:
    # Read-only: the agent may connect to the socket, never replace it.
    return Mount(source=egress_dir, target=EGRESS_DIR, read_only=True)


def pool_limits(pool: Pool) -> Limits | None:
    if not limits_supported():
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
        env={"PI_CODING_AGENT_DIR": AGENT_DIR, "GIT_CONFIG_NOSYSTEM": "1", **EGRESS_ENV},
        network="none",
        limits=pool_limits(pool),
    )
