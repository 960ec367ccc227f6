"""The allowlist proxy on a loop of the test's own, and a client of its Unix socket as
the in-writer forwarder connects to it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from writerpool.egress.allowlist import Allowlist, expand
from writerpool.egress.connect import ConnectLimits, ConnectSession, LocalListener
from writerpool.egress.connect_model import ConnectRecord
from writerpool.egress.grants import GrantWatch
from writerpool.egress.loop import InProcessLoop
from writerpool.egress.resolve import Lookup, system_lookup


@pytest.fixture
def host() -> Iterator[InProcessLoop]:
    """A loop of the test's own, as a session's egress process runs the proxy on."""
    loop = InProcessLoop()
    yield loop
    loop.close()


LIMITS = ConnectLimits(concurrent=4, total=40, header_bytes=4096, header_seconds=2.0,
                       idle_seconds=30.0)  # fmt: skip


class Records:
    def __init__(self) -> None:
        self.items: list[ConnectRecord] = []
        self._cond = threading.Condition()

    def __call__(self, record: ConnectRecord) -> None:
        with self._cond:
            self.items.append(record)
            self._cond.notify_all()

    def wait(self, count: int) -> list[ConnectRecord]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.items) >= count, timeout=20)
            return list(self.items)

    def settle(self, count: int) -> list[ConnectRecord]:
        """The records once `count` are in, or those in at a deadline (never asserted:
        the test asserts what the proxy then does)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.items) >= count, timeout=10)
            return list(self.items)


def open_proxy(
    host: InProcessLoop, tmp_path: Path, words: tuple[str, ...], records: Records,
    resolve: dict[str, tuple[str, ...]], limits: ConnectLimits = LIMITS,
    lookup: Lookup = system_lookup, grants: GrantWatch | None = None,
) -> LocalListener:  # fmt: skip
    (tmp_path / "egress").mkdir(mode=0o700, exist_ok=True)
    proxy = LocalListener(host, ConnectSession(
        session="s-0123456789abcdef", writer="ws-w1",
        socket_path=tmp_path / "egress" / "connect.sock",
        allowlist=Allowlist(expand(words, {})[0]), resolve=resolve, limits=limits,
        audit=records, lookup=lookup, grants=grants,
    ))  # fmt: skip
    proxy.start()
    return proxy


def dial(proxy: LocalListener | Path) -> socket.socket:
    path = proxy if isinstance(proxy, Path) else proxy.listener.socket_path
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        raise
    return sock


def head_of(sock: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode("latin-1")


def connect(proxy: LocalListener | Path, target: str) -> tuple[socket.socket, str]:
    sock = dial(proxy)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    return sock, head_of(sock)
