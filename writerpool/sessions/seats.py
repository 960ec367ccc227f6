"""Each client's tool calls: how many may be in progress, and the worker threads they run on.

A call that blocks (a process or container start, a lock, a file) runs its steps in
worker threads; waiting for a turn holds none (sessions/waits.py). The threads are each
client's own: its calls take the tokens of a limiter of its own (CLIENT_CALLS), and
close and abort those of a reserve of their own (ENDING_CALLS). So no client's calls
queue behind another's, and a client whose calls all run can still abort or close.

A service client with CLIENT_CALLS calls in progress has the next refused at once
(calls_busy); close and abort may go ENDING_CALLS past that. A call counts until its
task and every thread of its have ended: one the client cancelled or left runs its
thread to the end (the thread stops holding a limiter token then, so the count is what
bounds the threads), unless the thread had not begun: then it never does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import anyio

# Calls one client may have in progress at once.
CLIENT_CALLS = 16
# A few more, on threads of their own, for the calls that end what the client started
# (these are quick).
ENDING_CALLS = 4
ENDING_TOOLS = frozenset({"pi_session_abort", "pi_session_close"})

T = TypeVar("T")


class _GivenUp(Exception):
    """A step whose caller gave up before its thread began: nobody reads its result."""


@dataclass
class _Client:
    calls: anyio.CapacityLimiter
    ending: anyio.CapacityLimiter
    running: int = 0


class _Step:
    """One step's thread: queued, begun, or given up before it began (never runs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "queued"

    def begin(self) -> bool:
        with self._lock:
            if self._state == "given_up":
                return False
            self._state = "begun"
            return True

    def give_up(self) -> bool:
        """True when the thread had not begun: it never will."""
        with self._lock:
            if self._state != "queued":
                return False
            self._state = "given_up"
            return True


class Call:
    """One admitted call: its steps run on its client's threads; `ended` runs once the
    call's task and every thread of its are done (from whichever ends last)."""

    def __init__(self, seats: Seats, client: str | None, limiter: anyio.CapacityLimiter,
                 ended: Callable[[], None]) -> None:  # fmt: skip
        self._seats = seats
        self._client = client
        self._limiter = limiter
        self._ended = ended
        self._lock = threading.Lock()
        self._holds = 1  # the task's own, dropped when it leaves `async with`

    async def __aenter__(self) -> Call:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._drop()

    async def in_thread(self, work: Callable[[], T]) -> T:
        """`work` on a thread of the client's; cancelled meanwhile, the thread runs on
        to its end, or never begins if it had not."""
        step = _Step()
        with self._lock:
            self._holds += 1

        def run() -> T:
            if not step.begin():
                raise _GivenUp
            try:
                return work()
            finally:
                self._drop()

        try:
            return await anyio.to_thread.run_sync(
                run, abandon_on_cancel=True, limiter=self._limiter
            )
        except BaseException:
            if step.give_up():
                self._drop()
            raise

    def _drop(self) -> None:
        with self._lock:
            self._holds -= 1
            last = self._holds == 0
        if last:
            try:
                self._ended()
            finally:
                self._seats.leave(self._client)


class Seats:
    """Every client's calls in progress, and its limiters; thread-safe. A client's entry
    lives while it has a call in progress (bounded by the clients calling at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str | None, _Client] = {}

    def admit(
        self, client: str | None, tool: str, ended: Callable[[], None], refuse: bool = True
    ) -> Call | None:
        """A call of `client` (from the event loop), or None when it must be refused:
        `refuse` and the client's calls in progress are at its cap."""
        ending = tool in ENDING_TOOLS
        allowed = CLIENT_CALLS + (ENDING_CALLS if ending else 0)
        with self._lock:
            seats = self._clients.get(client)
            if seats is None:
                seats = _Client(anyio.CapacityLimiter(CLIENT_CALLS),
                                anyio.CapacityLimiter(ENDING_CALLS))  # fmt: skip
                self._clients[client] = seats
            if refuse and seats.running >= allowed:
                return None
            seats.running += 1
        return Call(self, client, seats.ending if ending else seats.calls, ended)

    def leave(self, client: str | None) -> None:
        with self._lock:
            seats = self._clients[client]
            seats.running -= 1
            if not seats.running:
                del self._clients[client]

    def running(self, client: str | None) -> int:
        with self._lock:
            seats = self._clients.get(client)
            return seats.running if seats is not None else 0
