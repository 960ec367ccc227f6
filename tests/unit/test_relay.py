"""The relay of a checked connection (`egress.relay`), on real sockets: an agent's Unix
socket and a loopback TCP upstream, as the allowlist proxy holds them. Every byte moves
both ways, in the kernel (splice) where it can and by copy where it cannot, with its
counts kept; the connection ends when either side ends it, or when both are idle for
the (injected) limit; a plain request's body stops at its declared end."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import writerpool.egress.relay as relay_module
from writerpool.egress.relay import Relayed, relay

UP, DOWN = os.urandom(3 * 1024 * 1024 + 17), os.urandom(2 * 1024 * 1024 + 5)


async def pairs() -> tuple[socket.socket, socket.socket, socket.socket, socket.socket]:
    """(agent end held by the relay, the agent), (upstream end held by the relay, origin)."""
    loop = asyncio.get_running_loop()
    relay_agent, agent = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    upstream = socket.socket()
    upstream.setblocking(False)
    accepted = loop.create_task(loop.sock_accept(listener))
    await loop.sock_connect(upstream, listener.getsockname())
    origin, _ = await accepted
    listener.close()
    for sock in (relay_agent, agent, origin):
        sock.setblocking(False)
    return relay_agent, agent, upstream, origin


async def send_then_close(sock: socket.socket, data: bytes) -> None:
    await asyncio.get_running_loop().sock_sendall(sock, data)
    sock.shutdown(socket.SHUT_WR)


async def read_all(sock: socket.socket) -> bytes:
    loop, out = asyncio.get_running_loop(), bytearray()
    while chunk := await loop.sock_recv(sock, 1 << 20):
        out += chunk
    return bytes(out)


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(scenario())


async def both_ways() -> tuple[Relayed, bytes, bytes]:
    relay_agent, agent, upstream, origin = await pairs()
    loop = asyncio.get_running_loop()
    relaying = loop.create_task(relay(relay_agent, upstream, idle=30.0))
    reads = loop.create_task(read_all_until(origin, len(UP)))
    await loop.sock_sendall(agent, UP)
    got_up = await reads
    await send_then_close(origin, DOWN)  # the origin's end of input ends the connection
    got_down = await read_all_until(agent, len(DOWN))
    relayed = await relaying
    upstream.close()  # as the proxy does
    for sock in (relay_agent, agent, origin):
        sock.close()
    return relayed, got_up, got_down


async def read_all_until(sock: socket.socket, size: int) -> bytes:
    loop, out = asyncio.get_running_loop(), bytearray()
    while len(out) < size and (chunk := await loop.sock_recv(sock, 1 << 20)):
        out += chunk
    return bytes(out)


def test_every_byte_moves_both_ways_in_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    spliced = [0]
    real = os.splice

    def counted(*args: Any, **kwargs: Any) -> int:
        moved = real(*args, **kwargs)
        spliced[0] += moved
        return moved

    monkeypatch.setattr(os, "splice", counted)
    relayed, got_up, got_down = run(both_ways)
    assert got_down == DOWN and got_up == UP
    assert (relayed.up.moved, relayed.down.moved, relayed.ended) == (len(UP), len(DOWN), "upstream")
    assert spliced[0] == 2 * (len(UP) + len(DOWN))  # into a pipe and out of it, no copy


def test_without_splice_the_same_bytes_are_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "splice")
    relayed, got_up, got_down = run(both_ways)
    assert got_down == DOWN and got_up == UP
    assert (relayed.up.moved, relayed.down.moved) == (len(UP), len(DOWN))


def test_the_agent_ending_ends_the_connection_though_the_upstream_is_silent() -> None:
    async def scenario() -> tuple[Relayed, bytes]:
        relay_agent, agent, upstream, origin = await pairs()
        relaying = asyncio.get_running_loop().create_task(relay(relay_agent, upstream, 600.0))
        await send_then_close(agent, b"hello")
        relayed = await relaying  # no byte from the origin, and the idle limit is far
        upstream.close()
        seen = await read_all(origin)
        for sock in (relay_agent, agent, origin):
            sock.close()
        return relayed, seen

    relayed, seen = run(scenario)
    assert (relayed.ended, relayed.up.moved, seen) == ("agent", 5, b"hello")


def test_a_connection_quiet_both_ways_is_cut_at_the_idle_limit() -> None:
    async def scenario() -> Relayed:
        relay_agent, agent, upstream, origin = await pairs()
        relayed = await relay(relay_agent, upstream, idle=0.05)
        for sock in (relay_agent, agent, upstream, origin):
            sock.close()
        return relayed

    relayed = run(scenario)
    assert (relayed.ended, relayed.up.moved, relayed.down.moved) == ("idle", 0, 0)


def test_a_plain_body_stops_at_its_declared_end() -> None:
    async def scenario() -> tuple[Relayed, bytes]:
        relay_agent, agent, upstream, origin = await pairs()
        loop = asyncio.get_running_loop()
        relaying = loop.create_task(relay(relay_agent, upstream, 30.0, body=10))
        await loop.sock_sendall(agent, b"0123456789GET /second HTTP/1.1\r\n\r\n")
        seen = await read_all_until(origin, 10)
        await send_then_close(origin, b"answer")
        assert await read_all_until(agent, 6) == b"answer"
        relayed = await relaying
        for sock in (relay_agent, agent, upstream, origin):
            sock.close()
        return relayed, seen

    relayed, seen = run(scenario)
    assert seen == b"0123456789" and (relayed.up.moved, relayed.down.moved) == (10, 6)


def test_a_relay_cancelled_as_it_ends_returns_only_once_its_threads_have(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server stopping cancels its connections, then closes the sockets and its loop. A
    connection caught as it ends (one side gone, the relay waiting for its threads) must
    not return before its threads let go of the sockets' descriptors (a closed number may
    name another file by then), nor leave a thread that posts to a closed loop. Here
    the second thread is made slow to return, as on a busy host."""
    move, ended = relay_module._move, []

    def slow_move(*args: Any) -> None:
        move(*args)
        ended.append(args)
        if len(ended) == 2:  # the direction the relay waits for after the first ended
            time.sleep(0.3)

    monkeypatch.setattr(relay_module, "_move", slow_move)

    async def scenario() -> list[threading.Thread]:
        relay_agent, agent, upstream, origin = await pairs()
        relaying = asyncio.get_running_loop().create_task(relay(relay_agent, upstream, 600.0))
        await send_then_close(agent, b"bye")  # the agent's side ends the connection
        await asyncio.sleep(0.1)  # the relay now waits for both threads to return
        relaying.cancel()
        with pytest.raises(asyncio.CancelledError):
            await relaying
        left = [t for t in threading.enumerate() if t.name == "egress-relay"]
        for sock in (relay_agent, agent, upstream, origin):
            sock.close()
        return left

    assert run(scenario) == []
