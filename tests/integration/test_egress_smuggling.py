"""Request smuggling through the allowlist proxy, on real sockets: an agent's head that a
lenient origin would read as two requests (or frame otherwise than the proxy) is
answered 400, audited as bad_request, and not one request of it reaches the origin.

The origin is Python's http.server on loopback with keep-alive, which, like many
origins, ends a header line at a bare LF: before the proxy parsed strictly, the first
head below reached it as two requests, the second for a host that is not listed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from writerpool.egress.allowlist import Allowlist, expand
from writerpool.egress.connect import ConnectLimits, ConnectSession, LocalListener
from writerpool.egress.connect_model import ConnectRecord
from writerpool.egress.loop import InProcessLoop

LIMITS = ConnectLimits(concurrent=4, total=40, header_bytes=4096, header_seconds=5.0,
                       idle_seconds=30.0)  # fmt: skip
# Each a head (and what the agent sends with it) for http://listed.test:PORT, in one write.
SMUGGLED = {
    "bare LF in a header value": "GET http://listed.test:{port}/first HTTP/1.1\r\nX-A: a\n\n"
    "GET /smuggled HTTP/1.1\nHost: unlisted.example\r\n\r\n",
    "bare CR": "GET http://listed.test:{port}/first HTTP/1.1\r\nHost: listed.test:{port}\r\n"
    "X-A: a\rGET /smuggled HTTP/1.1\r\n\r\n",
    "obsolete line folding": "GET http://listed.test:{port}/first HTTP/1.1\r\n"
    "Host: listed.test:{port}\r\nX-A: a\r\n Host: unlisted.example\r\n\r\n",
    "two Content-Length": "POST http://listed.test:{port}/first HTTP/1.1\r\n"
    "Host: listed.test:{port}\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
    "Content-Length with Transfer-Encoding": "POST http://listed.test:{port}/first HTTP/1.1\r\n"
    "Host: listed.test:{port}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
    "0\r\n\r\n",
    "a pipelined second request": "GET http://listed.test:{port}/first HTTP/1.1\r\n"
    "Host: listed.test:{port}\r\n\r\nGET http://unlisted.example/smuggled HTTP/1.1\r\n"
    "Host: unlisted.example\r\n\r\n",
    "a Host that is not the target's": "GET http://listed.test:{port}/first HTTP/1.1\r\n"
    "Host: unlisted.example\r\n\r\n",
}


class Origin:
    """A keep-alive HTTP/1.1 origin on loopback that records every request it answers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []  # (method, path, Host)
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keeps the connection for a next request

            def _answer(self) -> None:
                origin.requests.append((self.command, self.path, self.headers.get("Host", "")))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = f"answer {len(origin.requests)}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def origin() -> Iterator[Origin]:
    served = Origin()
    yield served
    served.close()


def exchange(path: Path, data: bytes) -> bytes:
    """Send `data` in one write, then read the proxy's whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(path))
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_smuggled_request_never_reaches_the_origin(tmp_path: Path, origin: Origin) -> None:
    records: list[ConnectRecord] = []
    done = threading.Condition()

    def audit(record: ConnectRecord) -> None:
        with done:
            records.append(record)
            done.notify_all()

    loop = InProcessLoop()
    (tmp_path / "egress").mkdir(mode=0o700)
    proxy = LocalListener(loop, ConnectSession(
        session="s-0123456789abcdef", writer="ws-w1",
        socket_path=tmp_path / "egress" / "connect.sock",
        allowlist=Allowlist(expand((f"http://listed.test:{origin.port}", "127.0.0.1/32"), {})[0]),
        resolve={"listed.test": ("127.0.0.1",)}, limits=LIMITS, audit=audit,
    ))  # fmt: skip
    proxy.start()
    try:
        for name, text in SMUGGLED.items():
            answer = exchange(proxy.listener.socket_path, text.format(port=origin.port).encode())
            status = answer.split(b"\r\n")[0].decode("latin-1")
            assert status.startswith("HTTP/1.1 400 ") and "(bad_request)" in status, (name, status)
            assert origin.requests == [], name
        # The same origin through the same proxy, asked plainly, answers: the refusals
        # above are the proxy's, not a broken path.
        plain = (f"GET http://listed.test:{origin.port}/plain HTTP/1.1\r\n"
                 f"Host: listed.test:{origin.port}\r\n\r\n")  # fmt: skip
        answer = exchange(proxy.listener.socket_path, plain.encode())
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"answer 1")
        assert origin.requests == [("GET", "/plain", f"listed.test:{origin.port}")]
        with done:
            assert done.wait_for(lambda: len(records) == len(SMUGGLED) + 1, timeout=20)
    finally:
        proxy.stop()
        loop.close()
    refused = [r for r in records if not r.allowed]
    assert len(refused) == len(SMUGGLED)
    assert {(r.reason, r.destination, r.address, r.bytes_up) for r in refused} == {
        ("bad_request", "<refused>", None, 0)
    }
    [allowed] = [r for r in records if r.allowed]
    assert (allowed.reason, allowed.destination) == ("allowed", f"listed.test:{origin.port}")
