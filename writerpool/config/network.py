"""The network kinds a writer can have: one table, read by modes, the container spec,
doctor, mode set and acceptance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from writerpool.errors import WriterpoolError

NetworkKind = Literal["provider", "none", "slirp4netns", "pasta"]
PodmanNetwork = Literal["none", "slirp4netns", "pasta"]
DEFAULT_NETWORK: NetworkKind = "provider"


@dataclass(frozen=True)
class NetworkInfo:
    kind: NetworkKind
    podman: PodmanNetwork  # what `podman run --network` gets
    limited: bool  # nothing but loopback (and, for provider, the proxy socket)
    egress: bool  # a per-session provider proxy on a Unix socket
    reach: str  # what the agent can reach, in words


NETWORKS: dict[str, NetworkInfo] = {
    "provider": NetworkInfo(
        "provider", "none", limited=True, egress=True,
        reach="only the profile's provider, through writerpool's proxy; no credential inside",
    ),
    "none": NetworkInfo(
        "none", "none", limited=True, egress=False,
        reach="nothing: no network at all, providers included",
    ),
    "slirp4netns": NetworkInfo(
        "slirp4netns", "slirp4netns", limited=False, egress=False,
        reach="whatever the host can reach; the key is copied in for each session",
    ),
    "pasta": NetworkInfo(
        "pasta", "pasta", limited=False, egress=False,
        reach="whatever the host can reach (Podman 4.4 or newer); the key is copied in for "
        "each session",
    ),
}  # fmt: skip
NETWORK_CHOICES = tuple(NETWORKS)


def network_info(kind: str) -> NetworkInfo:
    """The table's row for a stored kind; an unknown one is treated as not limited."""
    return NETWORKS.get(kind) or NetworkInfo(
        "slirp4netns",
        "slirp4netns",
        limited=False,
        egress=False,
        reach="unknown; the key is copied in",
    )


def classification(kind: str, allowlist: bool = False) -> str:
    """`limited`, `limited-allowlist` (a `provider` writer whose workspace has an egress
    allowlist) or `not_limited`, as the acceptance harness reports it."""
    if not network_info(kind).limited:
        return "not_limited"
    return "limited-allowlist" if allowlist and network_info(kind).egress else "limited"


def describe(kind: str) -> str:
    """One phrase for reports: the kind, its class, what it reaches."""
    info = network_info(kind)
    label = "limited" if info.limited else "NOT limited"
    return f"{kind} ({label}: {info.reach})"


def check_remote_network(host: str, network: str, allow: tuple[str, ...] | None) -> None:
    """A remote session reaches its provider only through the forwarded proxy (or not at
    all): an open network would need the key on the host, an allowlist its CA there."""
    info = network_info(network)
    if allow or not info.limited:
        raise WriterpoolError(
            "remote_session_unsupported",
            f"a session on host {host} needs the writer's network to be provider or none, "
            "without an allowlist: the provider's key stays on this machine",
        )
