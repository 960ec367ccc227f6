"""A hostile peer on the allowlist proxy's socket (`egress.handoff`).

Sending anything but one connected stream socket with the offer is refused with its
code, audited, leaves no descriptor in the proxy (its descriptors are counted in this
process, which runs it) and reaches nothing upstream; a handed socket the writer keeps
a copy of cannot stall the proxy. The real forwarder's side: test_egress_handoff_forwarder.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.connect import Records, dial, head_of, host
from tests.support.handoff import NAME, Upstream, open_tunnel, proxy_for, short_dir, upstream
from writerpool.config.caps import Caps
from writerpool.config.models import Config, Provider
from writerpool.config.providers import resolve_provider
from writerpool.egress.handoff import DECLINED, OFFER, TAKEN
from writerpool.egress.loop import InProcessLoop
from writerpool.egress.spec import ConnectListenerSpec
from writerpool.egress.supervisor import EgressSupervisor

__all__ = ["host", "short_dir", "upstream"]  # fixtures
REFUSED = "(handoff_refused)"


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
        sock, head = open_tunnel(proxy, upstream)  # the one slot is free again
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
        other, head = open_tunnel(proxy, upstream)
        other.close()
        ours.sendall(f"Host: {target}\r\n\r\n".encode())
        assert head_of(ours).startswith("HTTP/1.1 200 ")
    finally:
        ours.close()
        theirs.close()
        proxy.stop()
    assert head.startswith("HTTP/1.1 200 ")
    assert proxy.listener.handoffs == 1


def lingering() -> tuple[socket.socket, socket.socket]:
    """A TCP socket with SO_LINGER on (an hour) and its send queue full towards its
    peer (returned too), which never reads: the last close of it waits for that queue."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sock = socket.create_connection(listener.getsockname())
        silent, _ = listener.accept()
    silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1)
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        while True:  # bounded: the socket's send buffer and the peer's window
            sock.send(b"x" * 65536)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
    return sock, silent


@pytest.mark.parametrize("how", ["handed", "queued"])
def test_a_socket_set_to_linger_never_holds_the_proxy(
    host: InProcessLoop, short_dir: Path, upstream: Upstream, how: str
) -> None:
    """The proxy ends up with the last reference to a lingering socket (`lingering`):
    handed over as the agent's socket, the writer's copy closed ("handed"); or queued
    with a byte on a Unix socket handed over as the agent's ("queued": the proxy's read
    of that byte drops it). The kernel makes whichever thread drops the last reference
    wait; the proxy audits the connection and serves the next one meanwhile."""
    records = Records()
    proxy = proxy_for(host, short_dir, upstream, records)
    sock, silent = lingering()
    agent, theirs = socket.socketpair()
    target = "unlisted.handoff.test:443"
    try:
        if how == "queued":
            socket.send_fds(agent, [b"x"], [sock.fileno()])
            sock.close()  # queued on `theirs` only now
        handed = sock if how == "handed" else theirs
        with dial(proxy) as peer:
            socket.send_fds(peer, [OFFER], [handed.fileno()])
            assert peer.recv(1) == TAKEN
        handed.close()  # the proxy's copy is the last
        writer = silent if how == "handed" else agent
        writer.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        (record,) = records.wait(1)
        other, head = open_tunnel(proxy, upstream)
        other.close()
    finally:
        silent.close()  # unread bytes: a reset, which ends any close still lingering
        for each in (sock, agent, theirs):
            each.close()
        proxy.stop()
    expected = ("not_listed", target) if how == "handed" else ("bad_request", "<refused>")
    assert (record.allowed, record.reason, record.destination) == (False, *expected)
    assert head.startswith("HTTP/1.1 200 ")


def test_in_a_sessions_egress_process_a_lingering_socket_never_holds_its_loop(
    short_dir: Path, upstream: Upstream
) -> None:
    """As a session runs it: the allowlist proxy in the session's egress process takes a
    lingering socket ("handed" above) and serves the next connection meanwhile."""
    config = Config(providers={"p": Provider(base_url="http://127.0.0.1:9/v1")})
    provider = resolve_provider(config, "p")
    assert provider is not None
    spec = ConnectListenerSpec(
        socket="connect.sock", entries=(f"{NAME}:{upstream.port}", "127.0.0.1/32"),
        resolve={NAME: ("127.0.0.1",)},
        concurrent=4, total=20, header_bytes=4096, header_seconds=5.0, idle_seconds=30.0,
    )  # fmt: skip
    records, path = Records(), short_dir / "egress" / "connect.sock"
    host = EgressSupervisor(connect_audit=records)
    sock, silent = lingering()
    try:
        host.open(session="s-0123456789abcdef", writer="ws-w1", upstream=provider,
                  socket_path=path.parent / "proxy.sock", credential="sk-unused",
                  caps=Caps(requests=10, bytes_up=10**6, bytes_down=10**6, concurrent=2),
                  connect=spec)  # fmt: skip
        with dial(path) as peer:
            socket.send_fds(peer, [OFFER], [sock.fileno()])
            assert peer.recv(1) == TAKEN
        sock.close()  # the proxy's copy is the last
        silent.sendall(b"CONNECT unlisted.handoff.test:443 HTTP/1.1\r\n\r\n")
        (record,) = records.wait(1)
        target = f"{NAME}:{upstream.port}"
        with dial(path) as other:
            other.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = head_of(other)
    finally:
        silent.close()
        sock.close()
        host.close()
    assert (record.allowed, record.reason) == (False, "bad_request")
    assert head.startswith("HTTP/1.1 200 ")
