"""The one place that makes a `WriterHost` from a host's name."""

from __future__ import annotations

from writerpool.errors import UsageError
from writerpool.runtime.host import LOCAL, WriterHost
from writerpool.runtime.podman import PodmanHost


def open_host(name: str = LOCAL) -> WriterHost:
    """The host `name` (today only the local one: this account's Podman)."""
    if name != LOCAL:
        raise UsageError(f"no writer host is configured under the name {name!r}")
    return PodmanHost(LOCAL)
