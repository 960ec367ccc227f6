"""The peers of the harness's probes, on this machine's loopback for one block: the
probe target every allowed name leads to, the open relay the isolation control puts
where an allowlist proxy would be, and acceptance's provider behind the session's proxy
(`provider_listener`: what each agent's request brought, its key the canary).

The target answers whatever reaches it, so that a probe which got through can say so:
after the connection's sending side ends (or a short quiet), it answers 200 with the
number of request lines it read (a smuggled request counts). The relay is what an
allowlist proxy must not be: it reads a head as leniently as the most lenient server,
takes any name, address or TLS name, and passes every byte unchanged to the target (the
only place it can reach, whatever was asked). Threads of this process; both end with it.
"""

from __future__ import annotations

import contextlib
import re
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

PEER_SECONDS = 5.0  # a quiet this long ends reading (no probe waits on it when refused)
MAX_READ = 64 * 1024
HEAD_END = re.compile(rb"\r?\n\r?\n")
REQUEST_LINE = re.compile(rb"(?m)^[A-Z]{1,16} \S+ HTTP/1\.[01]\r?$")
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


def _read_until(sock: socket.socket, done: re.Pattern[bytes] | None) -> bytes:
    """Bytes read until `done` matches (None: the end of the sender's side), a quiet of
    PEER_SECONDS, or MAX_READ."""
    data = b""
    with contextlib.suppress(OSError):  # a timeout or a reset ends reading
        while len(data) < MAX_READ and not (done is not None and done.search(data)):
            chunk = sock.recv(MAX_READ - len(data))
            if not chunk:
                break
            data += chunk
    return data


class _Target(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(PEER_SECONDS)
        count = len(REQUEST_LINE.findall(_read_until(sock, None)))
        body = f"writerpool probe target: {count} request line(s)\n".encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        with contextlib.suppress(OSError):
            sock.sendall(head.encode() + body)


# How often a serving loop looks for shutdown(): acceptance waits that long per peer it ends.
SHUTDOWN_POLL = 0.02


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    block_on_close = False


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    target_port = 0


@contextlib.contextmanager
def _serving(server: socketserver.BaseServer) -> Iterator[None]:
    thread = threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def probe_target() -> Iterator[int]:
    """The target's port on 127.0.0.1 for the life of the block."""
    server = _Server(("127.0.0.1", 0), _Target)
    with _serving(server):
        yield server.server_address[1]


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` ends (or goes quiet), then end `sink`'s receiving side."""
    with contextlib.suppress(OSError):
        while chunk := source.recv(MAX_READ):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class _Relay(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        agent: socket.socket = self.request
        agent.settimeout(PEER_SECONDS)
        data = _read_until(agent, HEAD_END)
        words = data.split(b"\n", 1)[0].split()
        if len(words) < 2:
            return
        assert isinstance(self.server, _UnixServer)
        port = self.server.target_port
        with contextlib.suppress(OSError):  # the target gone (the block ended): nothing to do
            self._relay(agent, data, words, port)

    @staticmethod
    def _relay(agent: socket.socket, data: bytes, words: list[bytes], port: int) -> None:
        with socket.create_connection(("127.0.0.1", port), PEER_SECONDS) as upstream:
            if words[0] == b"CONNECT":
                found = HEAD_END.search(data)
                data = data[found.end() :] if found else b""
                agent.sendall(ESTABLISHED)
            upstream.sendall(data)  # a plain request goes on as it came, every byte
            back = threading.Thread(target=_pipe, args=(upstream, agent), daemon=True)
            back.start()
            _pipe(agent, upstream)
            back.join(PEER_SECONDS * 2)


@contextlib.contextmanager
def open_relay(directory: Path, port: int) -> Iterator[Path]:
    """The relay on a socket in `directory` for the life of the block; everything asked of
    it goes to `port` on 127.0.0.1."""
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / "connect.sock"
    server = _UnixServer(str(path), _Relay)
    server.target_port = port
    with _serving(server):
        yield path


# What the acceptance provider answers: the harness's agent checks look for it.
PROVIDER_ANSWER = b"writerpool acceptance provider\n"
CONTENT_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d{1,6})\r?$")
AUTHORIZATION = re.compile(rb"(?im)^authorization:[ \t]*([^\r\n]*)\r?$")


class _ProviderServer(_Server):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Provider)
        self.arrived: list[tuple[bytes, bytes]] = []  # (Authorization, body) of each request


class _Provider(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(PEER_SECONDS)
        data = _read_until(sock, HEAD_END)
        found = HEAD_END.search(data)
        if found is None:
            return
        head, body = data[: found.start()], data[found.end() :]
        length = CONTENT_LENGTH.search(head)
        with contextlib.suppress(OSError):
            while length is not None and len(body) < int(length.group(1)):
                chunk = sock.recv(MAX_READ)
                if not chunk:
                    break
                body += chunk
        auth = AUTHORIZATION.search(head)
        assert isinstance(self.server, _ProviderServer)
        self.server.arrived.append((auth.group(1).strip() if auth else b"", body[:MAX_READ]))
        length_line = f"Content-Length: {len(PROVIDER_ANSWER)}\r\n".encode()
        reply = b"HTTP/1.1 200 OK\r\n" + length_line + b"Connection: close\r\n\r\n"
        with contextlib.suppress(OSError):
            sock.sendall(reply + PROVIDER_ANSWER)


@contextlib.contextmanager
def provider_listener() -> Iterator[tuple[int, list[tuple[bytes, bytes]]]]:
    """Acceptance's provider on 127.0.0.1 for the block (where the session's proxy runs):
    its port and what arrived, the Authorization header and body of each request; it
    answers each with PROVIDER_ANSWER."""
    server = _ProviderServer()
    with _serving(server):
        yield server.server_address[1], server.arrived
