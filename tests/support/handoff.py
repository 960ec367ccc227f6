"""The allowlist proxy's handoff under test: a listed upstream on loopback, the proxy
on a loop of the test's own, and tunnels opened through it (tests/integration/
test_egress_handoff*.py)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.connect import Records, dial, head_of, open_proxy
from writerpool.egress.connect import ConnectLimits, LocalListener
from writerpool.egress.loop import InProcessLoop

NAME = "listed.handoff.test"


class Upstream:
    """A listed host on loopback: answers each chunk it gets with `ok`; counts the
    connections it accepted."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while conn.recv(65536):
                conn.sendall(b"ok")

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    served = Upstream()
    yield served
    served.close()


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="egh", dir="/tmp"))  # sun_path is short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def proxy_for(
    host: InProcessLoop, directory: Path, upstream: Upstream, records: Records, concurrent: int = 4
) -> LocalListener:
    limits = ConnectLimits(concurrent=concurrent, total=100, header_bytes=4096,
                           header_seconds=3.0, idle_seconds=30.0)  # fmt: skip
    words = (f"{NAME}:{upstream.port}", "127.0.0.1/32")
    return open_proxy(host, directory, words, records, {NAME: ("127.0.0.1",)}, limits)


def open_tunnel(proxy: LocalListener | int, upstream: Upstream) -> tuple[socket.socket, str]:
    """A CONNECT to the listed upstream, on the proxy's socket or a forwarder's port."""
    if isinstance(proxy, int):
        sock = socket.create_connection(("127.0.0.1", proxy), timeout=20)
    else:
        sock = dial(proxy)
    target = f"{NAME}:{upstream.port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    return sock, head_of(sock)
