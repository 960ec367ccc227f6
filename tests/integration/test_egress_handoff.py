"""The forwarder hands the agent's own connection to the allowlist proxy (SCM_RIGHTS).

A hostile peer on the proxy's socket sending anything but one connected stream socket
with its offer is refused with its code, audited, leaves no descriptor in the proxy
(its descriptors are counted in this process, which runs it) and reaches nothing
upstream. The real forwarder (images/egress-forwarder, run on the host) hands its
connections over and holds no socket of them afterwards; behind a relay that drops
descriptors, as an SSH forward does, the proxy declines and the forwarder relays.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REQUIRE
from tests.support.connect import Records, dial, head_of, open_proxy
from tests.support.egress import client_hello
from writerpool.config.paths import Paths
from writerpool.egress.connect import ConnectLimits, LocalListener
from writerpool.egress.handoff import DECLINED, OFFER, TAKEN
from writerpool.egress.loop import InProcessLoop
from writerpool.proc import run
from writerpool.runtime.image import DEFAULT_IMAGES_DIR, load_pin
from writerpool.runtime.podman import podman_env

FORWARDER = DEFAULT_IMAGES_DIR / "egress-forwarder"
NAME = "listed.handoff.test"
REFUSED = "(handoff_refused)"


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
def host() -> Iterator[InProcessLoop]:
    loop = InProcessLoop()
    yield loop
    loop.close()


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


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def connect_request() -> bytes:
    return f"CONNECT {NAME}:1 HTTP/1.1\r\nHost: {NAME}:1\r\n\r\n".encode()


def stream_pair() -> list[int]:
    """A connected stream socket whose other end already asks for the listed host: the
    proxy would go upstream if it took it."""
    ours, theirs = socket.socketpair()
    ours.sendall(connect_request())
    return [ours.detach(), theirs.detach()]


def two_sockets() -> tuple[list[int], list[int]]:
    fds = stream_pair()
    return fds, fds


def a_pipe() -> tuple[list[int], list[int]]:
    read_end, write_end = os.pipe()
    os.write(write_end, connect_request())
    return [read_end], [read_end, write_end]


def a_file() -> tuple[list[int], list[int]]:
    fd = os.open("/etc/hostname", os.O_RDONLY)
    return [fd], [fd]


def a_datagram_socket() -> tuple[list[int], list[int]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ours.send(connect_request())
    return [theirs.fileno()], [ours.detach(), theirs.detach()]


def a_listening_socket() -> tuple[list[int], list[int]]:
    listener = socket.create_server(("127.0.0.1", 0))
    return [listener.fileno()], [listener.detach()]


OFFERS: dict[str, Callable[[], tuple[list[int], list[int]]]] = {
    "two_descriptors": two_sockets,
    "a_pipe": a_pipe,
    "a_file": a_file,
    "a_datagram_socket": a_datagram_socket,
    "a_listening_socket": a_listening_socket,
}


@pytest.mark.parametrize("offered", sorted(OFFERS))
def test_an_offer_of_anything_but_one_stream_socket_is_refused_and_nothing_is_kept(
    host: InProcessLoop, short_dir: Path, upstream: Upstream, offered: str
) -> None:
    records = Records()
    proxy = proxy_for(host, short_dir, upstream, records)
    try:
        before = open_descriptors()
        sent, held = OFFERS[offered]()
        if offered == "two_descriptors":
            sent = held[1:] * 2  # the socket's own end, twice: two descriptors
        try:
            with dial(proxy) as peer:
                socket.send_fds(peer, [OFFER], sent)
                answer = head_of(peer)
        finally:
            for fd in held:
                os.close(fd)
        (record,) = records.wait(1)
        assert open_descriptors() == before
    finally:
        proxy.stop()
    assert answer.startswith("HTTP/1.1 400 ") and REFUSED in answer
    assert (record.allowed, record.reason, record.destination) == (
        False, "handoff_refused", "<refused>")  # fmt: skip
    assert upstream.accepted == 0
    assert proxy.listener.handoffs == 0


def test_a_descriptor_without_an_offer_is_refused(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    records = Records()
    proxy = proxy_for(host, short_dir, upstream, records)
    try:
        before = open_descriptors()
        held = stream_pair()
        try:
            with dial(proxy) as peer:
                socket.send_fds(peer, [connect_request()], held[1:])
                answer = head_of(peer)
        finally:
            for fd in held:
                os.close(fd)
        assert records.wait(1)[0].reason == "handoff_refused"
        assert open_descriptors() == before
    finally:
        proxy.stop()
    assert REFUSED in answer and upstream.accepted == 0


def test_an_offer_without_a_descriptor_is_declined_and_reaches_nothing(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    """The bare offer (what an SSH forward delivers) is answered DECLINED; the connection
    then speaks the old way, and a peer that says nothing more reaches nothing."""
    records = Records()
    proxy = proxy_for(host, short_dir, upstream, records)
    try:
        before = open_descriptors()
        with dial(proxy) as peer:
            peer.sendall(OFFER)
            assert peer.recv(1) == DECLINED
            peer.shutdown(socket.SHUT_WR)
            assert peer.recv(1) == b""
        records.wait(1)
        assert open_descriptors() == before
    finally:
        proxy.stop()
    assert upstream.accepted == 0 and proxy.listener.handoffs == 0


def test_a_handed_socket_that_never_reads_is_cut_and_the_proxy_serves_on(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    """The writer fills the handed socket's outgoing buffer before handing it over: the
    proxy's 200 cannot be sent, so the connection is cut (its loop never blocks on it),
    and it stops counting against the caps."""
    records = Records()
    proxy = proxy_for(host, short_dir, upstream, records, concurrent=1)
    ours, theirs = socket.socketpair()
    try:
        target = f"{NAME}:{upstream.port}"
        ours.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        theirs.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:  # bounded: the socket's send buffer
                theirs.send(b"x" * 65536)
        with dial(proxy) as peer:
            socket.send_fds(peer, [OFFER], [theirs.fileno()])
            assert peer.recv(1) == TAKEN
        theirs.close()
        (record,) = records.wait(1)
        assert proxy.listener.active == 0
        sock, head = open_tunnel_direct(proxy, target)  # the one slot is free again
        sock.close()
    finally:
        ours.close()
        theirs.close()
        proxy.stop()
    assert (record.allowed, record.bytes_up, record.bytes_down) == (True, 0, 0)
    assert head.startswith("HTTP/1.1 200 ")


def test_a_writer_that_makes_its_handed_socket_blocking_cannot_stall_the_proxy(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    """The writer keeps a copy of the socket it hands over and clears O_NONBLOCK (a flag
    both copies share), then sends half a head: the proxy reads it without blocking, and
    serves another connection meanwhile."""
    records = Records()
    proxy = proxy_for(host, short_dir, upstream, records)
    ours, theirs = socket.socketpair()
    target = f"{NAME}:{upstream.port}"
    try:
        with dial(proxy) as peer:
            socket.send_fds(peer, [OFFER], [theirs.fileno()])
            assert peer.recv(1) == TAKEN
        theirs.setblocking(True)  # the shared file description blocks from now on
        ours.sendall(f"CONNECT {target} HTTP/1.1\r\n".encode())  # the head goes on
        other, head = open_tunnel_direct(proxy, target)
        other.close()
        ours.sendall(f"Host: {target}\r\n\r\n".encode())
        assert head_of(ours).startswith("HTTP/1.1 200 ")
    finally:
        ours.close()
        theirs.close()
        proxy.stop()
    assert head.startswith("HTTP/1.1 200 ")
    assert proxy.listener.handoffs == 1


def open_tunnel_direct(proxy: LocalListener, target: str) -> tuple[socket.socket, str]:
    sock = dial(proxy)
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    return sock, head_of(sock)


# -- the real forwarder ----------------------------------------------------------------


@contextlib.contextmanager
def forwarder(socket_path: Path, directory: Path) -> Iterator[tuple[int, int]]:
    """The forwarder serving the allowlist port for `socket_path` (started the launcher's
    way, --background): its port and the serving process's pid."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": "0",
           "WRITERPOOL_EGRESS_SOCKET": str(directory / "unused.sock"),
           "WRITERPOOL_CONNECT_PORT": str(port),
           "WRITERPOOL_CONNECT_SOCKET": str(socket_path)}  # fmt: skip
    parent = subprocess.Popen(
        ["/usr/bin/python3", str(FORWARDER), "--background"], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        assert parent.wait(timeout=20) == 0  # the port accepts now
        (serving,) = [int(e.name) for e in Path("/proc").iterdir()
                      if e.name.isdigit() and _group(int(e.name)) == parent.pid]  # fmt: skip
        yield port, serving
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGTERM)


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def sockets_of(pid: int) -> int:
    links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    return sum(link.startswith("socket:") for link in links)


def open_tunnel(port: int, upstream: Upstream) -> tuple[socket.socket, str]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    target = f"{NAME}:{upstream.port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    return sock, head_of(sock)


def answered(sock: socket.socket, hello: bytes) -> bytes:
    """The upstream's answer to the tunnel's ClientHello."""
    sock.sendall(hello)
    return sock.recv(2)


def test_the_forwarder_hands_its_connections_over_and_keeps_none(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records, concurrent=1)
    try:
        with forwarder(proxy.listener.socket_path, short_dir) as (port, pid):
            idle = sockets_of(pid)
            sock, head = open_tunnel(port, upstream)
            with sock:
                assert head.startswith("HTTP/1.1 200 ")
                assert answered(sock, hello) == b"ok"
                assert proxy.listener.handoffs == 1
                assert sockets_of(pid) == idle  # the forwarder holds none of it
                over, refused = open_tunnel(port, upstream)  # past the cap: answered
                over.close()
            records.wait(2)
    finally:
        proxy.stop()
    assert refused.startswith("HTTP/1.1 429 ") and "(cap_concurrent)" in refused
    (allowed,) = [r for r in records.items if r.allowed]
    assert (allowed.bytes_up, allowed.bytes_down) == (len(hello), 2)


class DroppingRelay:
    """A Unix socket relayed byte for byte to another with read() and write(), as an SSH
    forward relays it: what is attached to the bytes (descriptors) is dropped."""

    def __init__(self, path: Path, target: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen()
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            inner.connect(str(self.target))
            for src, dst in ((conn, inner), (inner, conn)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()


def test_behind_a_relay_that_drops_descriptors_the_forwarder_relays(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records)
    relay = DroppingRelay(short_dir / "relay.sock", proxy.listener.socket_path)
    try:
        with forwarder(short_dir / "relay.sock", short_dir) as (port, _):
            sock, head = open_tunnel(port, upstream)
            with sock:
                assert head.startswith("HTTP/1.1 200 ")
                assert answered(sock, hello) == b"ok"
                sock.shutdown(socket.SHUT_WR)  # the agent ends it: the tunnel ends
                assert sock.recv(1) == b""
            (record,) = records.wait(1)
    finally:
        relay.close()
        proxy.stop()
    assert proxy.listener.handoffs == 0
    assert (record.allowed, record.bytes_up, record.bytes_down) == (True, len(hello), 2)


PROBE = """
import socket, sys
port, target, hello = 18090, sys.argv[1], bytes.fromhex(sys.argv[2])
with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
    conn.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += conn.recv(4096)
    conn.sendall(hello)
    print(head.split(b" ")[1].decode(), conn.recv(2).decode(), flush=True)
"""


@pytest.mark.podman
@pytest.mark.image
def test_inside_a_writer_the_forwarder_hands_the_connection_over(
    host: InProcessLoop, short_dir: Path, upstream: Upstream, image_pin: Path
) -> None:
    """Across the bind-mounted socket, from the forwarder as pi's launcher runs it (PID 1,
    --network none) to a proxy on the host: the proxy takes the agent's socket."""
    if shutil.which("podman") is None:
        if REQUIRE:
            pytest.fail("podman is missing")
        pytest.skip("podman is missing")
    pin = load_pin(Paths.from_env())
    assert pin is not None
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records)
    name = f"writerpool-test-handoff-{uuid.uuid4().hex[:8]}"
    argv = ["podman", "run", "--rm", "--name", name, "--label", "io.writerpool.test=handoff",
            "--pull=never", "--network", "none", "--userns=keep-id", "--read-only",
            "--cap-drop=all", "--security-opt=no-new-privileges",
            "-v", f"{proxy.listener.socket_path.parent}:/egress",
            "-e", "WRITERPOOL_EGRESS_PORT=18089", "-e", "WRITERPOOL_EGRESS_SOCKET=/egress/none",
            "-e", "WRITERPOOL_CONNECT_PORT=18090",
            "-e", "WRITERPOOL_CONNECT_SOCKET=/egress/connect.sock", pin.image_id,
            "/usr/bin/python3", "/usr/local/lib/writerpool/egress-forwarder", "--supervise",
            "/usr/bin/python3", "-c", PROBE, f"{NAME}:{upstream.port}", hello.hex()]  # fmt: skip
    try:
        done = run(argv, env=podman_env(), timeout=180, check=False)
        records.wait(1)
    finally:
        run(["podman", "rm", "-f", "--", name], env=podman_env(), timeout=60, check=False)
        proxy.stop()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.out.split() == ["200", "ok"]
    assert proxy.listener.handoffs == 1
    (record,) = records.items
    assert (record.allowed, record.bytes_up, record.bytes_down) == (True, len(hello), 2)
