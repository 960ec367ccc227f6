"""The service's HTTP connections, bounded before any token is seen.

Anyone who can reach 127.0.0.1 can open a connection, and the HTTP server keeps one
that never finishes its request head forever: a few hundred idle or slowly dripping
connections would take every descriptor of the service and starve every client. So a
connection must finish each request head within HEAD_SECONDS (the whole head, not a
byte at a time), and at most MAX_WAITING connections older than MIN_AGE wait for one at
once: past that, those that have waited longest are closed. A connection that sent a
whole head is the Guard's (token, Host, Origin) and then the transport's (body cap).
A client that stops reading holds the answer being written to it: one that has read
nothing of it for STALL_SECONDS is cut (pipelined requests, even refused ones, would
otherwise fill its buffer and keep the connection for good).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

# How long a connection has to send a whole request head (and, kept alive, the next).
HEAD_SECONDS = 10.0
# How many connections may wait for their request head at once (each holds at most
# h11's 16 KiB of unparsed head and one descriptor), beyond those opened in the last
# MIN_AGE seconds.
MAX_WAITING = 64
MIN_AGE = 1.0
# How long writing to a connection may wait for its client to read: loopback clients
# read at once, and an answer is at most a few hundred KiB.
STALL_SECONDS = 10.0


class _Waiting:
    """The connections of one server still waiting for a request head, oldest first.

    Past MAX_WAITING the oldest are closed, but only once they have waited MIN_AGE: a
    client that sent its request at once may not have been read yet when a burst of
    others is accepted, and must not be closed for them."""

    def __init__(self) -> None:
        self.conns: OrderedDict[int, tuple[float, BoundedH11]] = OrderedDict()
        self.evicted = 0
        self._timer: asyncio.TimerHandle | None = None

    def admit(self, conn: BoundedH11) -> None:
        self.conns.pop(id(conn), None)  # kept in the order they began to wait
        self.conns[id(conn)] = (conn.loop.time(), conn)
        self.enforce(conn.loop)

    def leave(self, conn: BoundedH11) -> None:
        self.conns.pop(id(conn), None)

    def enforce(self, loop: asyncio.AbstractEventLoop) -> None:
        too_young = loop.time() - MIN_AGE
        while len(self.conns) > MAX_WAITING:  # bounded by the waiting connections
            since, oldest = next(iter(self.conns.values()))
            if since > too_young:
                break
            self.conns.popitem(last=False)
            oldest.drop("evicted")
            if self.evicted == 0:
                log.warning("more than %d connections wait for a request: the oldest are closed",
                            MAX_WAITING)  # fmt: skip
            self.evicted += 1
        if len(self.conns) > MAX_WAITING and self._timer is None:
            # One round at a time: a burst over the cap schedules one, not one each.
            self._timer = loop.call_later(MIN_AGE, self._round, loop)

    def _round(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self.enforce(loop)


class BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head and a cap on waiters."""

    waiting = _Waiting()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        # Writing pauses as soon as the kernel takes no more: the stall deadline then
        # holds for any answer left unsent, not only for one past 64 KiB (which a
        # keep-alive close would otherwise wait to send for good).
        self.transport.set_write_buffer_limits(high=0)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self._writing()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(STALL_SECONDS, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._writing()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a whole request head was parsed
            self._head_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._await_head()  # kept alive: the next head has the same deadline

    def drop(self, why: str) -> None:
        self._cancel_timer()
        if not self.transport.is_closing():
            log.debug("closed a connection that sent no request (%s)", why)
            # Not close(): it would wait to send what is buffered to a client that may
            # never read it.
            self.transport.abort()

    def _stalled(self) -> None:
        self._stall_timer = None
        log.debug("cut a connection whose client read nothing for %d s", STALL_SECONDS)
        self.transport.abort()

    def _writing(self) -> None:
        """Writes flow again (or the connection ended): no stall deadline."""
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _await_head(self) -> None:
        self._cancel_timer()
        self._head_timer = self.loop.call_later(HEAD_SECONDS, self._head_late)
        self.waiting.admit(self)

    def _head_late(self) -> None:
        self.waiting.leave(self)
        self.drop("late")

    def _head_arrived(self) -> None:
        self._cancel_timer()
        self.waiting.leave(self)

    def _cancel_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
