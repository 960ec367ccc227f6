"""The one place that makes a `WriterHost` from a host's name."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from types import TracebackType

from writerpool.config.hosts import Host
from writerpool.errors import UsageError
from writerpool.runtime.host import LOCAL, WriterHost
from writerpool.runtime.podman import PodmanHost
from writerpool.runtime.remote import RemotePodman, connect


def open_host(name: str = LOCAL) -> WriterHost:
    """The host `name` (only the local one: this account's Podman). A host over SSH
    needs a connection held open: `HostSet`."""
    if name != LOCAL:
        raise UsageError(f"no writer host is configured under the name {name!r}")
    return PodmanHost(LOCAL)


class HostSet:
    """The hosts one command reaches: the local one, and each configured host over SSH
    connected on first use and kept until the set closes (one connection per host,
    shared by the command's threads)."""

    def __init__(self, configured: Mapping[str, Host], local: WriterHost | None = None) -> None:
        self._configured = dict(configured)
        self._local = local or open_host()
        self._open: dict[str, RemotePodman] = {}
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()

    def get(self, name: str) -> WriterHost:
        """The host `name`: host_unknown when no [hosts.NAME] names it, the connection's
        own codes (writer_host_unreachable, host_key_mismatch…) when it cannot be reached."""
        if name == LOCAL:
            return self._local
        with self._lock:
            if name not in self._open:
                host = self._configured.get(name)
                if host is None:
                    raise UsageError(f"no [hosts.{name}] in the configuration", code="host_unknown")
                self._open[name] = self._stack.enter_context(connect(name, host))
            return self._open[name]

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> HostSet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
