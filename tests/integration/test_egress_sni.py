"""The TLS name is the CONNECT name, on real sockets: a loopback TLS origin whose
certificate covers two names (a front end serving several sites on one address), one of
them listed. A client that asks for the listed name in TLS is served; one that tunnels
to the listed name and asks TLS for the other, or for no name, or speaks plain HTTP in
the tunnel, is refused by the proxy with the reason audited, and the origin receives
not one byte of it."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.connect import Records, connect, open_proxy
from tests.support.egress import client_hello, make_ca, server_context
from writerpool.egress.loop import InProcessLoop

LISTED, OTHER = "origin.test", "other.test"


class Origin:
    """A TLS origin on loopback for both names; per connection, the bytes it was sent
    before its first handshake byte (0: none came) and the server name TLS asked for."""

    def __init__(self, directory: Path) -> None:
        self.ca, cert, key = make_ca(directory, "origin", (LISTED, OTHER))
        self.context = server_context(cert, key)
        self.names: list[str | None] = []
        self.context.sni_callback = lambda _obj, name, _ctx: self.names.append(name)
        self.first_bytes: list[int] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._done = threading.Condition()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        try:
            peeked = conn.recv(65536, socket.MSG_PEEK)
            with self._done:
                self.first_bytes.append(len(peeked))
                self._done.notify_all()
            if not peeked:
                return
            with self.context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(65536)
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\norigin")
        except OSError:
            pass
        finally:
            conn.close()

    def connections(self, count: int) -> list[int]:
        with self._done:
            self._done.wait_for(lambda: len(self.first_bytes) >= count, timeout=20)
            return list(self.first_bytes)


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[Origin]:
    served = Origin(tmp_path / "ca")
    yield served
    served.listener.close()


def tls_get(sock: socket.socket, context: ssl.SSLContext, name: str | None) -> bytes:
    with context.wrap_socket(sock, server_hostname=name) as tls:
        tls.sendall(b"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n")
        data = b""
        while chunk := tls.recv(4096):
            data += chunk
    return data


def test_only_a_clienthello_for_the_connect_name_reaches_the_origin(
    tmp_path: Path, origin: Origin
) -> None:
    loop = InProcessLoop()
    records = Records()
    target = f"{LISTED}:{origin.port}"
    proxy = open_proxy(loop, tmp_path, (target, "127.0.0.1/32"), records,
                       {LISTED: ("127.0.0.1",)})  # fmt: skip
    trusting = ssl.create_default_context(cafile=str(origin.ca))
    unnamed = ssl.create_default_context(cafile=str(origin.ca))
    unnamed.check_hostname = False
    try:
        sock, head = connect(proxy, target)
        assert head.startswith("HTTP/1.1 200 ")
        assert tls_get(sock, trusting, LISTED).endswith(b"origin")  # the listed name: served
        # The tunnel opens; its hello is judged, and the alert stands for the reason.
        for context, name, alert in ((trusting, OTHER, "UNRECOGNIZED_NAME"),
                                     (unnamed, None, "MISSING_EXTENSION")):  # fmt: skip
            sock, head = connect(proxy, target)
            assert head.startswith("HTTP/1.1 200 ")
            with pytest.raises(ssl.SSLError, match=alert):
                tls_get(sock, context, name)
        sock, head = connect(proxy, target)
        with sock:  # plain HTTP in a tunnel to a TLS entry: told in words
            sock.sendall(b"GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n")
            answer = sock.recv(4096).decode("latin-1")
        assert answer.startswith(f"HTTP/1.1 403 writerpool: {target} is not allowed (not_tls)")
        sock, head = connect(proxy, target)
        with sock:  # the listed name's hello, sent a few bytes at a time: read whole
            hello = client_hello(LISTED)
            for at in range(0, len(hello), 100):
                sock.sendall(hello[at : at + 100])
            assert sock.recv(1) != b""  # the origin's handshake answer came back
        connections = origin.connections(5)
    finally:
        proxy.stop()
        loop.close()
    seen = records.wait(5)
    refused = {r.reason: r for r in seen if not r.allowed}
    assert set(refused) == {"sni_mismatch", "sni_missing", "not_tls"}
    assert refused["sni_mismatch"].sni == OTHER and refused["sni_missing"].sni is None
    assert all((r.bytes_up, r.entry, r.address) == (0, target, "127.0.0.1")
               for r in refused.values())  # fmt: skip
    allowed = [r for r in seen if r.allowed]
    assert [(r.sni, r.reason) for r in allowed] == [(LISTED, "allowed")] * 2
    # Five connections reached the origin's listener; the three refused sent it nothing.
    assert sorted(connections)[:3] == [0, 0, 0] and all(n > 0 for n in sorted(connections)[3:])
    assert origin.names == [LISTED, LISTED]
    assert proxy.listener.denied == {target: "sni_mismatch"}
