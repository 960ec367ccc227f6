"""A checked connection's bytes, both ways, until either side ends it (`egress.connect`).

Both directions run at once. The connection ends when either side ends it (its end of
input, or an error on either socket): what was already read is delivered first, then the
caller closes both sockets, so an agent that goes away never leaves its upstream half
waiting, and the connection stops counting against the session's caps at once. Each
direction keeps its own byte count and the time of its last byte; the connection is cut
when neither direction moved a byte for the idle limit (a download the agent only reads
keeps it open, a silent upstream does not).
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field
from typing import Literal

CHUNK = 256 * 1024
Ended = Literal["agent", "upstream", "idle"]


@dataclass
class Flow:
    """One direction: the bytes it moved and the loop time of the last of them."""

    moved: int = 0
    last: float = 0.0


@dataclass
class Relayed:
    up: Flow = field(default_factory=Flow)  # agent to upstream
    down: Flow = field(default_factory=Flow)  # upstream to agent
    ended: Ended | None = None

    @property
    def last(self) -> float:
        return max(self.up.last, self.down.last)


async def relay(
    agent: socket.socket,
    upstream: socket.socket,
    idle: float,
    body: int | None = None,
    relayed: Relayed | None = None,
) -> Relayed:
    """Move bytes until either side ends or both are idle for `idle` seconds. `body`:
    how many more bytes of the agent's go upstream (a plain request's body); the agent's
    bytes past it are read and dropped, one request per connection. Both sockets are
    non-blocking; the caller closes them. `relayed` receives the counts as they grow."""
    loop = asyncio.get_running_loop()
    state = relayed or Relayed()
    state.up.last = state.down.last = loop.time()
    up = loop.create_task(_copy(agent, upstream, state.up, body))
    down = loop.create_task(_copy(upstream, agent, state.down, None))
    try:
        while True:  # bounded: each turn waits until the idle limit or an end
            quiet = state.last + idle - loop.time()
            if quiet <= 0:
                state.ended = "idle"
                break
            done, _ = await asyncio.wait({up, down}, timeout=quiet,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if done:
                state.ended = "agent" if up in done else "upstream"
                break
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
    return state


async def _copy(src: socket.socket, dst: socket.socket, flow: Flow, limit: int | None) -> None:
    """Copy from src to dst until src's end of input or an error on either."""
    loop = asyncio.get_running_loop()
    buffer = memoryview(bytearray(CHUNK))
    left = limit
    try:
        while size := await loop.sock_recv_into(src, buffer):
            flow.last = loop.time()
            sent = size if left is None else min(size, left)
            if left is not None:
                left -= sent
            if sent:
                await loop.sock_sendall(dst, buffer[:sent])
                flow.moved += sent
    except (ConnectionError, OSError):
        pass  # an error ends the connection as an end of input does
