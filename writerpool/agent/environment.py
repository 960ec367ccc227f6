"""pi's environment, from one function for every placement: a writer's container, a
read-only session's container, and pi on the host.

What every placement needs is written here once: the agent directory, and the Node
preload that keeps pi's RPC output linear (agent/compact.py); without it an answer of
about 50 KB in small deltas kills pi with `write ENOBUFS`. Each placement then adds
its own part: the host's private HOME and tool PATH, a container's egress forwarder,
a writer's git identity and caches.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from writerpool.agent.compact import node_options
from writerpool.config.network import network_info
from writerpool.proc import CA_VARIABLES
from writerpool.runtime.host import EGRESS_DIR, EGRESS_SOCKET

# The network "kind" of pi started on the host rather than in a container.
HOST = "host"
# The loopback port the image's forwarder (images/egress-forwarder, started by
# images/pi-launcher) relays to the provider proxy's socket EGRESS_DIR/EGRESS_SOCKET (a
# container's place for it: runtime/host.py, where each host mounts it).
EGRESS_PORT = 41480
EGRESS_ENV = {
    "WRITERPOOL_EGRESS_SOCKET": f"{EGRESS_DIR}/{EGRESS_SOCKET}",
    "WRITERPOOL_EGRESS_PORT": str(EGRESS_PORT),
}
# The allowlist proxy (`mode set --allow`): its socket beside the provider proxy's, the
# forwarder's second port, and the host's public certificates the writer's tools trust.
CONNECT_SOCKET = "connect.sock"
CONNECT_PORT = 41481
EGRESS_CA = "ca.pem"
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
CACHE_ENV = {
    "go": {"GOPATH": "/pi/go", "GOCACHE": "/pi/go/cache", "GOTOOLCHAIN": "local"},
    "uv": {"UV_CACHE_DIR": "/pi/uv/cache", "npm_config_cache": "/pi/uv/npm"},
}
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


def pi_env(
    agent_dir: str | Path,
    network: str,
    *,
    tmpdir: Path | None = None,
    writer: str | None = None,
    cache: str | None = None,
    allow: bool = False,
) -> dict[str, str]:
    """The whole environment pi gets (a container's HOME and TMPDIR come from the spec).

    `agent_dir`: the agent directory as pi sees it, with the preload in it
    (render_agent_dir installs it). `network`: the container's network kind, or HOST;
    pi on the host needs `tmpdir`, its private HOME. `writer`: commits name it.
    `cache`: the writer's cache kind. `allow`: the workspace has an allowlist (its
    proxy is reached through the egress directory, so only with a provider network).
    """
    env = {"PI_CODING_AGENT_DIR": str(agent_dir), "NODE_OPTIONS": node_options(agent_dir)}
    if network == HOST:
        if tmpdir is None:
            raise ValueError("pi on the host needs its private tmpdir")
        env.update(_host_part(tmpdir))
    else:
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        if network_info(network).egress:
            env.update(EGRESS_ENV)
            if allow:
                env.update(ALLOW_ENV)
    if writer is not None:
        env.update(_identity(writer))
    if cache is not None:
        env.update(CACHE_ENV.get(cache, {}))
    return env


def _host_part(tmpdir: Path) -> dict[str, str]:
    """HOME is the session's private tmpdir, so pi and the tools it runs find no
    configuration of the operator's there."""
    env = {
        "PATH": tool_path(),
        "HOME": str(tmpdir),
        "TMPDIR": str(tmpdir),
        "LANG": "C.UTF-8",
        "PI_OFFLINE": "1",
        "PI_TELEMETRY": "0",
    }
    env.update({k: os.environ[k] for k in CA_VARIABLES if os.environ.get(k)})
    return env


def _identity(writer: str) -> dict[str, str]:
    """Commits made in a writer name the writer, never the operator."""
    return {
        f"GIT_{who}_{field}": value
        for who in ("AUTHOR", "COMMITTER")
        for field, value in (
            ("NAME", f"{writer} (writerpool)"),
            ("EMAIL", f"{writer}@writerpool.invalid"),
        )
    }


def tool_path() -> str:
    """PATH for pi on the host: node, rg and fd wherever they are, then the system."""
    dirs: list[str] = []
    for tool in ("node", "rg", "fd", "fdfind"):
        found = shutil.which(tool)
        if found:
            dirs.append(str(Path(found).parent))
    return ":".join(dict.fromkeys([*dirs, *SYSTEM_PATH]))
