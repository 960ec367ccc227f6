"""A checked connection's bytes, both ways, until either side ends it (`egress.connect`).

Both directions run at once. The connection ends when either side ends it (its end of
input, or an error on either socket): what was already read is delivered first, then
both sockets are shut and the caller closes them, so an agent that goes away never
leaves its upstream half waiting, and the connection stops counting against the
session's caps at once. Each direction keeps its own byte count and the time of its
last byte; the connection is cut when neither direction moved a byte for the idle limit
(a download the agent only reads keeps it open, a silent upstream does not).

The bytes move in the kernel: each direction is a thread of its own that splices
(`os.splice`) from its source socket into a pipe and from the pipe into the other
socket, blocking in the kernel between the two (no event loop turn, no byte through
Python). Where splice is unavailable (another OS, a socket the kernel cannot splice)
the direction copies instead; a plain request's body is copied, its length counted to
stop at the declared end. The loop only waits for the directions and the idle limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

CHUNK = 256 * 1024
# Asked for; the kernel may give less. Every pipe of the operator account counts against
# one per-user budget (fs.pipe-user-pages-soft, 64 MiB by default) shared by all its
# sessions' proxies and writers; past it new pipes get two pages. A quarter MiB keeps
# hundreds of tunnels within it and moves as much per call as the sockets offer.
PIPE_SIZE = 256 * 1024
JOIN_SECONDS = 5.0
Ended = Literal["agent", "upstream", "idle"]
_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 0)
# splice() errors that mean "not for these descriptors" (or "not allowed here", by a
# seccomp filter): the direction copies instead.
_NO_SPLICE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM})


@dataclass
class Flow:
    """One direction: the bytes it moved and the monotonic time of the last of them
    (written by its own thread only)."""

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
    shut when it returns (or is cancelled); the caller closes them. `relayed` receives
    the counts as they grow."""
    state = relayed or Relayed()
    state.up.last = state.down.last = time.monotonic()
    for sock in (agent, upstream):
        sock.setblocking(True)  # each direction blocks in the kernel, in its own thread
    up = _Direction(agent, upstream, state.up, body)
    down = _Direction(upstream, agent, state.down, None)
    try:
        while True:  # bounded: each turn waits until the idle limit or an end
            quiet = state.last + idle - time.monotonic()
            if quiet <= 0:
                state.ended = "idle"
                break
            done, _ = await asyncio.wait({up.ended, down.ended}, timeout=quiet,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if done:
                state.ended = "agent" if up.ended in done else "upstream"
                break
    finally:
        for sock in (agent, upstream):  # both directions' threads return at once
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        # Neither socket may be closed while a thread still uses its descriptor (its
        # number could name another file by then), cancelled or not.
        try:
            await asyncio.shield(asyncio.wait({up.ended, down.ended}))
        except asyncio.CancelledError:
            up.join()
            down.join()
            raise
    return state


class _Direction:
    """One direction in a thread of its own; `ended` is done when the thread has ended."""

    def __init__(self, src: socket.socket, dst: socket.socket, flow: Flow, limit: int | None):
        loop = asyncio.get_running_loop()
        self.ended: asyncio.Future[None] = loop.create_future()

        def run() -> None:
            try:
                _move(src, dst, flow, limit)
            finally:
                # The loop may be closed by now (its server stopped while this thread
                # returned): nobody waits on the future then.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_done, self.ended)

        self._thread = threading.Thread(target=run, name="egress-relay", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread from the loop's own thread: only after both sockets were
        shut, when it returns at once (bounded, should a kernel call linger)."""
        self._thread.join(JOIN_SECONDS)


def _done(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


def _move(src: socket.socket, dst: socket.socket, flow: Flow, limit: int | None) -> None:
    """One direction, until src's end of input or an error on either socket."""
    try:
        if limit is None and hasattr(os, "splice"):
            try:
                _splice(src, dst, flow)
                return
            except _SpliceUnsupportedError:
                pass  # nothing was moved yet: copy from the start
        _copy(src, dst, flow, limit)
    except OSError:
        pass  # an error ends the connection as an end of input does


class _SpliceUnsupportedError(Exception):
    pass


def _splice(src: socket.socket, dst: socket.socket, flow: Flow) -> None:
    """Splice src into a pipe and the pipe into dst; the pipe is empty between reads."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    source, sink = src.fileno(), dst.fileno()
    try:
        try:
            size = os.splice(source, write_end, PIPE_SIZE, flags=_SPLICE_FLAGS)
        except OSError as exc:
            if exc.errno in _NO_SPLICE:
                raise _SpliceUnsupportedError from exc
            raise
        while size:  # bounded by the source's end of input
            flow.last = time.monotonic()
            _drain(read_end, sink, size, flow)
            size = os.splice(source, write_end, PIPE_SIZE, flags=_SPLICE_FLAGS)
    finally:
        os.close(read_end)
        os.close(write_end)


def _drain(read_end: int, sink: int, size: int, flow: Flow) -> None:
    while size:  # bounded: what the pipe holds
        sent = os.splice(read_end, sink, size, flags=_SPLICE_FLAGS)
        size -= sent
        flow.moved += sent


def _copy(src: socket.socket, dst: socket.socket, flow: Flow, limit: int | None) -> None:
    """Copy from src to dst until src's end of input."""
    buffer = memoryview(bytearray(CHUNK))
    left = limit
    while size := src.recv_into(buffer):
        flow.last = time.monotonic()
        sent = size if left is None else min(size, left)
        if left is not None:
            left -= sent
        if sent:
            dst.sendall(buffer[:sent])
            flow.moved += sent
