"""The door of every listener in a session's egress process: bounded before any parsing.

A connection is accepted only while the listener holds fewer than `connections`;
past that it is closed at once. The first request line must arrive within
`first_line_seconds` and the whole header block within `head_seconds` and
`head_bytes`; a connection that misses either is closed and nothing was parsed. Only
then is the connection handed, with the bytes read so far, to the listener's own
protocol (the provider proxy's HTTP server, the CONNECT proxy). Each connection
carries one request: whoever serves it closes it after the response, so a second
header block on the same connection never escapes these bounds.

Accept failures (out of descriptors or memory) are logged once per listener; the
loop waits a little and goes on, so a session that exhausts its own limits fails
itself and nothing else.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Gate", "GateLimits", "Serve"]

log = logging.getLogger(__name__)

# What one header block may hold; the provider APIs' requests carry a few hundred bytes.
HEAD_BYTES = 32 * 1024
_END = b"\r\n\r\n"
_ACCEPT_PAUSE = 0.1
# accept() errors that mean "out of a resource": wait, the resource comes back.
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

Serve = Callable[[socket.socket, bytes], Awaitable[None]]


@dataclass(frozen=True)
class GateLimits:
    connections: int = 64
    first_line_seconds: float = 5.0
    head_seconds: float = 10.0
    head_bytes: int = HEAD_BYTES


class HeadRefused(Exception):
    """The header block was too slow, too large or cut off."""


class Gate:
    """Accepts on one listening socket; `serve(conn, head)` owns each connection after."""

    def __init__(self, name: str, sock: socket.socket, serve: Serve, limits: GateLimits) -> None:
        self.name = name
        self.limits = limits
        self._sock = sock
        self._serve = serve
        self._open = 0  # connections accepted and not yet closed
        self._tasks: set[asyncio.Task[None]] = set()
        self._accepting: asyncio.Task[None] | None = None
        self._logged: set[str] = set()
        self.refused = 0  # connections closed at the door (over the cap or a bad head)

    def start(self) -> None:
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def stop(self) -> None:
        """Stop accepting and close every connection this gate still holds."""
        if self._accepting is not None:
            self._accepting.cancel()
        tasks = [t for t in (self._accepting, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._sock.close()

    def log_once(self, key: str, message: str, *args: object) -> None:
        """Log `message` the first time `key` happens on this listener, never again."""
        if key not in self._logged:
            self._logged.add(key)
            log.warning("egress %s: " + message, self.name, *args)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:
                if exc.errno not in _EXHAUSTED:
                    raise
                self.log_once("accept", "accept failed (%s); waiting for connections to end",
                              errno.errorcode.get(exc.errno or 0, "?"))  # fmt: skip
                await asyncio.sleep(_ACCEPT_PAUSE)
                continue
            if self._open >= self.limits.connections:
                self.refused += 1
                self.log_once("cap", "more than %d connections at once; the rest are closed",
                              self.limits.connections)  # fmt: skip
                conn.close()
                continue
            self._open += 1
            task = loop.create_task(self._one(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _one(self, conn: socket.socket) -> None:
        try:
            try:
                head = await asyncio.wait_for(self._head(conn), self.limits.head_seconds)
            except (HeadRefused, TimeoutError, OSError):
                self.refused += 1
                return
            await self._serve(conn, head)
        finally:
            conn.close()
            self._open -= 1

    async def _head(self, conn: socket.socket) -> bytes:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        data = bytearray()
        first_line = loop.time() + self.limits.first_line_seconds
        while _END not in data:
            room = self.limits.head_bytes - len(data)
            if room <= 0:
                raise HeadRefused
            if b"\n" in data:
                chunk = await loop.sock_recv(conn, room)
            else:
                left = first_line - loop.time()
                if left <= 0:
                    raise HeadRefused
                chunk = await asyncio.wait_for(loop.sock_recv(conn, room), left)
            if not chunk:
                raise HeadRefused
            data += chunk
        return bytes(data)
