"""The one place that makes a `WriterHost` from a host's name."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from types import TracebackType

from writerpool.config.hosts import HostConfig, known_host
from writerpool.config.models import load_config
from writerpool.config.network import check_remote_network
from writerpool.config.paths import Paths
from writerpool.errors import UsageError
from writerpool.runtime.host import LOCAL, WriterHost
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.remote import RemotePodman, connect


def open_host() -> WriterHost:
    """This machine's host (`local`: this account's Podman). A host over SSH needs a
    connection held open: `WriterHosts`."""
    return LocalPodman()


def configured_host(paths: Paths, name: str) -> HostConfig:
    """The `[hosts.NAME]` table of the configuration, or host_unknown."""
    host = load_config(paths).config.hosts.get(name)
    if host is None:
        raise UsageError(f"no [hosts.{name}] in the configuration", code="host_unknown")
    return host


class WriterHosts:
    """The hosts one command (or one server, across its sessions) reaches: the local one,
    and each configured host over SSH connected on first use and kept until the set
    closes (one connection per host, shared by the command's threads). A connection
    found lost is made again by the next `get`."""

    def __init__(
        self, configured: Mapping[str, HostConfig], local: WriterHost | None = None
    ) -> None:
        self._configured = dict(configured)
        self._local = local or open_host()
        self._open: dict[str, tuple[RemotePodman, contextlib.ExitStack]] = {}
        self._lock = threading.Lock()

    def require(self, name: str) -> None:
        """host_unknown unless `name` is this machine's or a configured [hosts.NAME]."""
        if not known_host(name, self._configured):
            raise UsageError(f"no [hosts.{name}] in the configuration", code="host_unknown")

    def get(self, name: str) -> WriterHost:
        """The host `name`: host_unknown when no [hosts.NAME] names it, the connection's
        own codes (writer_host_unreachable, host_key_mismatch…) when it cannot be reached."""
        self.require(name)
        if name == LOCAL:
            return self._local
        with self._lock:
            held = self._open.get(name)
            if held is not None and not held[0].connected():
                del self._open[name]
                held[1].close()  # its ssh process is gone or cut off: what is left goes
            if name not in self._open:
                own = contextlib.ExitStack()
                self._open[name] = (own.enter_context(connect(name, self._configured[name])), own)
            return self._open[name][0]

    def check_network(self, name: str, network: str, allow: tuple[str, ...] | None) -> None:
        """What host `name` refuses of a writer's network (WriterHost.check_network),
        asked of its kind without connecting: a plan reaches no host."""
        self.require(name)
        if name == LOCAL:
            self._local.check_network(network, allow)
        else:
            check_remote_network(name, network, allow)

    def close(self) -> None:
        with self._lock:
            held, self._open = list(self._open.values()), {}
        with contextlib.ExitStack() as closing:  # each closed, even when another fails
            for _, own in held:  # bounded by the configured hosts
                closing.push(own)

    def __enter__(self) -> WriterHosts:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
