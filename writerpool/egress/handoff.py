"""The agent's own connection, handed to the allowlist proxy by the in-writer forwarder.

The forwarder (images/egress-forwarder) accepts the agent's connection inside the
writer and offers it over the session's Unix socket: one byte, OFFER, with the
connection's descriptor attached (SCM_RIGHTS). The proxy answers TAKEN, closes the Unix
connection, and reads the request from, and relays between, the agent's own socket and
the upstream; the forwarder closes its copy and leaves the path. One hop and one
process fewer on every byte.

A Unix socket does not carry descriptors everywhere: one forwarded over SSH delivers
the byte and drops what was attached. An offer that arrives bare is answered DECLINED
and the same connection then carries the agent's bytes, relayed by the forwarder, as
before the handoff existed: that fallback is the only other way. A connection that
does not start with OFFER (a client speaking to the socket directly, as the acceptance
harness does) is read as it always was; any other answer the forwarder gets is the
proxy speaking on that connection (a refusal past a cap), relayed to the agent.

The writer is hostile, so what it sends is checked before anything is done with it:
the first read has room for exactly one descriptor (the kernel closes any more and
says so with MSG_CTRUNC), every descriptor received is closed unless it is kept as
the agent's socket, and that one must be a connected stream socket (TCP over IPv4 or
IPv6, or a Unix stream socket), never a listening one. Anything else, and a descriptor
that comes without an offer, is refused (`handoff_refused`, answered 400 on the Unix
connection and audited). The proxy reads the agent's socket only without blocking
(`egress.sockets.receive`); it never connects, binds or sets an option on it, and it
never sends a socket of its own (an upstream) into the writer: a TCP socket passed from
the host's network namespace could be re-aimed (connect with AF_UNSPEC, then anywhere).
"""

from __future__ import annotations

import array
import os
import socket
import stat

from writerpool.egress.sockets import ready, send_all

OFFER = b"\x00"  # never the first byte of an HTTP request
TAKEN = b"+"
DECLINED = b"-"
HANDOFF_REFUSED = "handoff_refused"
_FD = array.array("i").itemsize
_FAMILIES: dict[int, int] = {
    socket.AF_INET: socket.IPPROTO_TCP,
    socket.AF_INET6: socket.IPPROTO_TCP,
    socket.AF_UNIX: 0,
}


class HandoffRefused(Exception):
    """What the writer's side sent on the Unix socket is not a clean offer."""


async def first_read(peer: socket.socket, size: int) -> tuple[socket.socket | None, bytes]:
    """The peer's first bytes (at most `size`), or the agent's socket it handed over and
    b"" (the peer is closed then). Raises HandoffRefused, and ConnectionResetError at
    an end of input."""
    while True:  # bounded: each turn waits for the socket to be readable
        try:
            data, ancillary, flags, _ = peer.recvmsg(
                size, socket.CMSG_LEN(_FD), socket.MSG_CMSG_CLOEXEC | socket.MSG_DONTWAIT
            )
            break
        except (BlockingIOError, InterruptedError):
            await ready(peer)
    received = _descriptors(ancillary)
    try:
        if flags & socket.MSG_CTRUNC or len(received) > 1 or _foreign(ancillary):
            raise HandoffRefused("more than one descriptor, or ancillary data of another kind")
        if not data:
            raise ConnectionResetError("the peer ended before its first byte")
        if data[:1] != OFFER:
            if received:
                raise HandoffRefused("a descriptor without an offer")
            return None, data
        if len(data) != 1:
            raise HandoffRefused("bytes along with the offer")
        if not received:
            await send_all(peer, DECLINED)  # it did not arrive: the bytes come this way
            return None, b""
        agent = _stream(received.pop())
    finally:
        for fd in received:  # bounded: one at most
            os.close(fd)
    try:
        await send_all(peer, TAKEN)
    except BaseException:
        agent.close()
        raise
    peer.close()  # the Unix connection has served its purpose
    return agent, b""


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """Every descriptor the kernel put in this process (all must be closed or kept)."""
    received: list[int] = []
    for level, kind, data in ancillary:  # bounded: the room for one item
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(data[: len(data) - len(data) % _FD])
            received.extend(fds)
    return received


def _foreign(ancillary: list[tuple[int, int, bytes]]) -> bool:
    return any((level, kind) != (socket.SOL_SOCKET, socket.SCM_RIGHTS)
               for level, kind, _ in ancillary)  # fmt: skip


def _stream(fd: int) -> socket.socket:
    """`fd` as the agent's socket, if it is a connected stream socket of a kind the
    proxy relays; closed and refused otherwise."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise HandoffRefused("the descriptor is not a socket")
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        os.close(fd)
        raise HandoffRefused("the socket cannot be read as one") from exc
    except BaseException:
        os.close(fd)
        raise
    try:
        family = sock.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
        if (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) != socket.SOCK_STREAM
            or family not in _FAMILIES
            or sock.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL) != _FAMILIES[family]
            or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
        ):
            raise HandoffRefused("the socket is not a stream connection")
        sock.getpeername()  # OSError (ENOTCONN) when it is connected to nothing
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise HandoffRefused("the socket is not connected") from exc
    except BaseException:
        sock.close()
        raise
    return sock
