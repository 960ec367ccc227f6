"""The allowlist proxy against a registry-like test host on loopback, through its Unix
socket as the in-writer forwarder connects: TLS passes through (the test CA verifies
the host's name end to end), refusals name the host, every connection is audited."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.connect import Records, connect, dial, head_of, host, open_proxy
from tests.support.egress import client_hello
from tests.support.registry import NAME, Registry, registry
from writerpool.config.caps import Caps
from writerpool.config.models import Config, Provider
from writerpool.config.providers import resolve_provider
from writerpool.egress.connect import ConnectLimits
from writerpool.egress.loop import InProcessLoop
from writerpool.egress.spec import ConnectListenerSpec
from writerpool.egress.supervisor import EgressSupervisor

__all__ = ["host"]  # fixtures


@pytest.fixture
def test_host(tmp_path: Path) -> Iterator[Registry]:
    with registry(tmp_path / "registry") as served:
        yield served


def fetch_over_tls(sock: socket.socket, ca: Path, name: str, path: str) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with context.wrap_socket(sock, server_hostname=name) as tls:
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := tls.recv(65536):
            data += chunk
    return data


def test_a_listed_host_is_reached_through_tls_the_proxy_never_opens(
    host: InProcessLoop, tmp_path: Path, test_host: Registry
) -> None:
    records = Records()
    words = (test_host.entry, "127.0.0.1/32")
    proxy = open_proxy(host, tmp_path, words, records, {NAME: ("127.0.0.1",)})
    try:
        sock, head = connect(proxy, test_host.entry)
        assert head.startswith("HTTP/1.1 200 ")
        page = fetch_over_tls(sock, test_host.ca, NAME, "/simple/wptiny/")
        assert b"200 OK" in page.split(b"\r\n")[0] and b"wptiny-0.1-py3-none-any.whl" in page
    finally:
        proxy.stop()
    [record] = records.wait(1)
    assert (record.allowed, record.reason, record.entry) == (True, "allowed", test_host.entry)
    assert record.address == "127.0.0.1" and record.bytes_down > len(page) // 2
    assert not proxy.listener.socket_path.exists()


def test_refusals_name_the_host_and_reason_and_are_audited(
    host: InProcessLoop, tmp_path: Path, test_host: Registry
) -> None:
    records = Records()
    resolve: dict[str, tuple[str, ...]] = {NAME: ("127.0.0.1",), "rebind.test": ("127.0.0.2",),
               "inside.test": ("10.20.30.40",), "meta.test": ("169.254.169.254",)}  # fmt: skip
    words = (test_host.entry, "127.0.0.1/32", f"rebind.test:{test_host.port}",
             "inside.test", "meta.test")  # fmt: skip
    proxy = open_proxy(host, tmp_path, words, records, resolve)
    cases = {
        "unlisted.test:443": "not_listed",
        f"{NAME}:8443": "port_not_listed",
        f"rebind.test:{test_host.port}": "address_loopback",
        "inside.test:443": "address_private",
        "meta.test:443": "address_metadata",
        "10.0.0.1:443": "not_listed",
        "127.0.0.1:22": "port_not_listed",
        "[::1]:443": "not_listed",
    }
    try:
        for target, reason in cases.items():
            sock, head = connect(proxy, target)
            with sock:
                status = head.split("\r\n")[0]
                assert status.startswith("HTTP/1.1 403 writerpool: "), status
                assert f"is not allowed ({reason})" in status and target in status
                assert f"{target} is not allowed" in head.partition("\r\n\r\n")[2]
                assert sock.recv(1) == b""  # closed after the answer
    finally:
        proxy.stop()
    seen = {r.destination: (r.allowed, r.reason) for r in records.wait(len(cases))}
    assert seen == {t: (False, r) for t, r in cases.items()}
    assert proxy.listener.denied == cases


class RecordingLookup:
    """A resolver that answers from a table and records every question."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.answers[host]


def test_names_are_decided_before_any_lookup_and_the_address_tried_is_audited(
    host: InProcessLoop, tmp_path: Path
) -> None:
    """An unlisted (or malformed) name is refused without a question to the resolver; a
    listed name is asked once per connection, every answer judged, the connection made
    only to one that passed; the audit line names the address refused or connected to."""
    upstream = socket.create_server(("127.0.0.1", 0))
    port = upstream.getsockname()[1]
    hello = client_hello("mixed.test")

    def answer() -> None:
        conn, _ = upstream.accept()
        with conn:
            read_exactly(conn, len(hello))
            conn.sendall(b"reached")

    threading.Thread(target=answer, daemon=True).start()
    lookup = RecordingLookup({"inside.test": ["10.20.30.40", "fd00::7"],
                              "mixed.test": ["10.20.30.41", "127.0.0.1"]})  # fmt: skip
    records = Records()
    words = ("inside.test", f"mixed.test:{port}", "gone.test", "127.0.0.1/32")
    proxy = open_proxy(host, tmp_path, words, records, {}, lookup=lookup)
    try:
        for target in ("unlisted.test:443", "bad_name.test:443", "inside.test:8443"):
            sock, head = connect(proxy, target)
            sock.close()
            assert " 403 " in head.split("\r\n")[0] or " 400 " in head.split("\r\n")[0]
        assert lookup.asked == []  # refused on the name alone
        sock, head = connect(proxy, "inside.test:443")
        sock.close()
        assert "(address_private)" in head.split("\r\n")[0]
        sock, head = connect(proxy, "gone.test:443")
        sock.close()
        assert "(resolve_failed)" in head.split("\r\n")[0]
        sock, head = connect(proxy, f"mixed.test:{port}")
        with sock:
            assert head.startswith("HTTP/1.1 200 ")
            sock.sendall(hello)
            assert sock.recv(16) == b"reached"
        assert lookup.asked == [("inside.test", 443), ("gone.test", 443), ("mixed.test", port)]
    finally:
        proxy.stop()
        upstream.close()
    seen = {r.destination: (r.reason, r.address) for r in records.wait(6)}
    assert seen["unlisted.test:443"] == ("not_listed", None)
    assert seen["inside.test:8443"] == ("port_not_listed", None)
    assert seen["inside.test:443"] == ("address_private", "10.20.30.40")
    assert seen["gone.test:443"] == ("resolve_failed", None)
    assert seen[f"mixed.test:{port}"] == ("allowed", "127.0.0.1")


def test_plain_http_passes_only_for_http_entries_one_request_per_connection(
    host: InProcessLoop, tmp_path: Path
) -> None:
    asked: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append((self.path, self.headers.get("Host", "")))
            body = b"plain answer"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    port = server.server_address[1]
    records = Records()
    words = (f"http://plain.test:{port}", "127.0.0.1/32", f"tls-only.test:{port}")
    resolve: dict[str, tuple[str, ...]] = {
        "plain.test": ("127.0.0.1",),
        "tls-only.test": ("127.0.0.1",),
    }
    proxy = open_proxy(host, tmp_path, words, records, resolve)
    try:
        sock = dial(proxy)
        sock.sendall(f"GET http://plain.test:{port}/a?b=1 HTTP/1.1\r\nHost: PLAIN.test.:{port}\r\n"
                     "Proxy-Authorization: Basic eDp5\r\n\r\n".encode())  # fmt: skip
        with sock:
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(b"plain answer")
        assert asked == [("/a?b=1", f"plain.test:{port}")]
        for target in (f"http://tls-only.test:{port}/", f"http://unlisted.test:{port}/"):
            sock = dial(proxy)
            authority = target.removeprefix("http://").removesuffix("/")
            sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
            with sock:
                assert head_of(sock).startswith("HTTP/1.1 403 writerpool: ")
        sock, head = connect(proxy, f"plain.test:{port}")  # an http:// entry: no CONNECT
        sock.close()
        assert "(scheme_not_listed)" in head.split("\r\n")[0]
    finally:
        proxy.stop()
        server.shutdown()
        server.server_close()
    reasons = sorted(r.reason for r in records.wait(4))
    assert reasons == ["allowed", "not_listed", "scheme_not_listed", "scheme_not_listed"]


def test_caps_bound_headers_time_and_connections(host: InProcessLoop, tmp_path: Path) -> None:
    records = Records()
    limits = ConnectLimits(concurrent=2, total=6, header_bytes=1024, header_seconds=1.0,
                           idle_seconds=30.0)  # fmt: skip
    proxy = open_proxy(host, tmp_path, ("a.example.test",), records, {}, limits)
    try:
        big = dial(proxy)
        big.sendall(b"CONNECT a.example.test:443 HTTP/1.1\r\nX: " + b"y" * 4000 + b"\r\n\r\n")
        assert "(header_too_large)" in head_of(big)
        big.close()
        silent = dial(proxy)  # sends nothing: cut at the header deadline
        assert silent.recv(1) == b""
        silent.close()
        held = [dial(proxy) for _ in range(2)]
        deadline = time.monotonic() + 10
        while len(records.items) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        third = dial(proxy)
        assert "(cap_concurrent)" in head_of(third)
        third.close()
        for sock in held:
            sock.close()
        records.wait(5)
        later = [dial(proxy) for _ in range(2)]
        answers = [head_of(s) for s in later[1:]]
        assert all("(cap_connections)" in a for a in answers)
        for sock in later:
            sock.close()
    finally:
        proxy.stop()
    reasons = sorted(r.reason for r in records.wait(7))
    assert {"header_too_large", "header_timeout", "cap_concurrent", "cap_connections"} <= set(
        reasons
    )


def test_an_idle_tunnel_is_cut_and_a_busy_one_is_kept(host: InProcessLoop, tmp_path: Path) -> None:
    """A download keeps its tunnel open past the idle timeout though the client sends
    nothing; a tunnel with no byte either way is cut."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    records = Records()
    limits = ConnectLimits(concurrent=4, total=10, header_bytes=4096, header_seconds=5.0,
                           idle_seconds=2.5)  # fmt: skip
    words = (f"idle.test:{port}", f"127.0.0.1/32:{port}")
    proxy = open_proxy(host, tmp_path, words, records, {"idle.test": ("127.0.0.1",)}, limits)

    hello = client_hello("idle.test")

    def trickle() -> None:
        upstream, _ = listener.accept()
        with upstream:
            read_exactly(upstream, len(hello))  # the client has read the proxy's answer
            for _ in range(10):  # 3 s, longer than the idle timeout, a byte every 0.3 s
                upstream.sendall(b"x")
                time.sleep(0.3)
        idle, _ = listener.accept()
        with idle:
            read_exactly(idle, len(hello))
            idle.recv(1)  # sends nothing; returns when the proxy cuts the tunnel

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    try:
        busy, head = connect(proxy, f"idle.test:{port}")
        assert head.startswith("HTTP/1.1 200 ")
        busy.sendall(hello)
        with busy:
            got = b""
            while chunk := busy.recv(16):
                got += chunk
        assert got == b"x" * 10
        quiet, head = connect(proxy, f"idle.test:{port}")
        assert head.startswith("HTTP/1.1 200 ")
        with quiet:
            quiet.sendall(hello)
            assert quiet.recv(1) == b""  # cut after the idle timeout
        server.join(timeout=20)
        assert not server.is_alive()
    finally:
        proxy.stop()
        listener.close()
    traffic = sorted((r.bytes_up, r.bytes_down) for r in records.wait(2))
    assert traffic == [(len(hello), 0), (len(hello), 10)]


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := sock.recv(size - len(data))):
        data += chunk
    return data


class SilentUpstream:
    """A loopback listener that accepts and never answers, nor closes (even at the end of
    its input, as a server waiting on a handshake may); it records, per connection, the
    bytes it got before the proxy ended its side."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[int] = []
        self.held: list[socket.socket] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._hold, args=(conn,), daemon=True).start()

    def _hold(self, conn: socket.socket) -> None:
        got = 0
        self.held.append(conn)  # closed only when the test ends
        conn.settimeout(60)
        with contextlib.suppress(OSError):
            while chunk := conn.recv(65536):  # until the proxy ends its side
                got += len(chunk)
        with self._cond:
            self.received.append(got)
            self._cond.notify_all()

    def closed(self, count: int) -> list[int]:
        with self._cond:
            self._cond.wait_for(lambda: len(self.received) >= count, timeout=10)
            return list(self.received)


def test_a_tunnel_the_agent_closes_stops_counting_at_once(
    host: InProcessLoop, tmp_path: Path
) -> None:
    """An agent opens tunnels up to the cap to a host that accepts and never answers, and
    closes them: the upstream halves are closed too, the connections stop counting, and
    a CONNECT to a healthy listed host is admitted next (the idle limit is far away)."""
    silent = SilentUpstream()
    healthy = socket.create_server(("127.0.0.1", 0))
    healthy_port = healthy.getsockname()[1]

    def answer() -> None:
        conn, _ = healthy.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"healthy answer")

    threading.Thread(target=answer, daemon=True).start()
    records = Records()
    limits = ConnectLimits(concurrent=2, total=100, header_bytes=4096, header_seconds=5.0,
                           idle_seconds=600.0)  # fmt: skip
    words = (f"silent.test:{silent.port}", f"healthy.test:{healthy_port}", "127.0.0.1/32")
    resolve: dict[str, tuple[str, ...]] = {
        "silent.test": ("127.0.0.1",),
        "healthy.test": ("127.0.0.1",),
    }
    proxy = open_proxy(host, tmp_path, words, records, resolve, limits)
    try:
        tunnels = []
        for _ in range(2):
            sock, head = connect(proxy, f"silent.test:{silent.port}")
            assert head.startswith("HTTP/1.1 200 ")
            sock.sendall(client_hello("silent.test"))
            tunnels.append(sock)
        with dial(proxy) as over:  # answered at once, before it says where to
            assert "(cap_concurrent)" in head_of(over).split("\r\n")[0]  # the tunnels count
        for sock in tunnels:
            sock.close()
        records.settle(3)
        assert proxy.listener.active == 0
        closed = silent.closed(2)  # both upstream halves saw the proxy close its side
        assert len(closed) == 2 and all(n > 0 for n in closed)
        sock, head = connect(proxy, f"healthy.test:{healthy_port}")
        assert head.startswith("HTTP/1.1 200 ")
        with sock:
            sock.sendall(client_hello("healthy.test"))
            assert sock.recv(64) == b"healthy answer"
    finally:
        proxy.stop()
        silent.close()
        healthy.close()
    seen = records.wait(4)
    tunnels_seen = [r for r in seen if r.destination == f"silent.test:{silent.port}"]
    assert [(r.allowed, r.reason) for r in tunnels_seen] == [(True, "allowed")] * 2
    assert all(r.bytes_up > 0 and r.bytes_down == 0 for r in tunnels_seen)


def test_the_allowlist_proxy_runs_in_the_sessions_egress_process(
    tmp_path: Path, test_host: Registry
) -> None:
    """Through `EgressSupervisor.open`, as a session gets it: the same process as the provider
    proxy (not this one), its records and refusals back on the server's side, its socket
    gone when the session's egress stops."""
    records = Records()
    config = Config(providers={"p": Provider(base_url="http://127.0.0.1:9/v1")})
    upstream = resolve_provider(config, "p")
    assert upstream is not None
    spec = ConnectListenerSpec(
        socket="connect.sock", entries=(test_host.entry, "127.0.0.1/32"),
        resolve={NAME: ("127.0.0.1",)}, concurrent=4, total=20, header_bytes=4096,
        header_seconds=5.0, idle_seconds=30.0,
    )  # fmt: skip
    egress = tmp_path / "egress"
    host = EgressSupervisor(connect_audit=records)
    try:
        session = host.open(
            session="s-0123456789abcdef", writer="ws-w1", socket_path=egress / "proxy.sock",
            upstream=upstream, credential="sk-unused",
            caps=Caps(requests=10, bytes_up=10**6, bytes_down=10**6, concurrent=2),
            connect=spec,
        )  # fmt: skip
        assert session.pid != os.getpid()
        sock, head = connect(egress / "connect.sock", test_host.entry)
        assert head.startswith("HTTP/1.1 200 ")
        page = fetch_over_tls(sock, test_host.ca, NAME, "/simple/wptiny/")
        assert b"wptiny-0.1-py3-none-any.whl" in page
        refused, head = connect(egress / "connect.sock", "unlisted.test:443")
        refused.close()
        assert "unlisted.test:443 is not allowed (not_listed)" in head
        seen = records.wait(2)
        assert session.denied == {"unlisted.test:443": "not_listed"}
        session.stop()
    finally:
        host.close()
    assert sorted((r.destination, r.allowed) for r in seen) == [
        (test_host.entry, True), ("unlisted.test:443", False)
    ]  # fmt: skip
    assert not (egress / "connect.sock").exists() and not (egress / "proxy.sock").exists()


def test_a_flood_of_idle_connections_is_refused_and_the_proxy_recovers(
    tmp_path: Path, test_host: Registry
) -> None:
    """300 connections that never send a byte, in the session's egress process: past the
    concurrency cap each is answered 429 and closed at once, the ones within it are cut
    at the header deadline, and then a listed host is reached again."""
    config = Config(providers={"p": Provider(base_url="http://127.0.0.1:9/v1")})
    upstream = resolve_provider(config, "p")
    assert upstream is not None
    spec = ConnectListenerSpec(
        socket="connect.sock", entries=(test_host.entry, "127.0.0.1/32"),
        resolve={NAME: ("127.0.0.1",)}, concurrent=4, total=1000, header_bytes=4096,
        header_seconds=2.0, idle_seconds=30.0,
    )  # fmt: skip
    egress = tmp_path / "egress"
    host = EgressSupervisor(connect_audit=Records())
    try:
        session = host.open(
            session="s-0123456789abcdef", writer="ws-w1", socket_path=egress / "proxy.sock",
            upstream=upstream, credential="sk-unused",
            caps=Caps(requests=10, bytes_up=10**6, bytes_down=10**6, concurrent=2),
            connect=spec,
        )  # fmt: skip
        flood: list[socket.socket] = []
        try:
            while len(flood) < 300:
                try:
                    flood.append(dial(egress / "connect.sock"))
                except BlockingIOError:
                    time.sleep(0.01)  # the backlog is full: the proxy is catching up
            answers = [head_of(sock).split("\r\n")[0] for sock in flood[4:]]
            assert all("(cap_concurrent)" in a for a in answers), answers[:3]
            for sock in flood[:4]:
                assert sock.recv(1) == b""  # cut at the header deadline, never answered
        finally:
            for sock in flood:
                sock.close()
        again, head = connect(egress / "connect.sock", test_host.entry)
        assert head.startswith("HTTP/1.1 200 ")
        assert b"wptiny" in fetch_over_tls(again, test_host.ca, NAME, "/simple/wptiny/")
        assert session.alive
    finally:
        host.close()
