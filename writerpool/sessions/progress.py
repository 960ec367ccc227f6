"""Progress of a long tool call, shared between the worker thread that runs it and the
event loop that reports it to the client as `notifications/progress`.

The worker sets a line ("starting writer demo-w1") or a function that describes the
state when asked ("turn running: 3 tool calls, 41 s"); the loop asks every few
seconds while the call runs. Lines hold no paths, prompts or secrets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable

import anyio

PROGRESS_INTERVAL = 2.0

Describe = Callable[[], str]
Send = Callable[[float, str], Awaitable[None]]


class Progress:
    """Thread-safe: set from a worker thread, read from the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._line: str | None = None
        self._describe: Describe | None = None
        self.started = time.monotonic()

    def say(self, line: str) -> None:
        with self._lock:
            self._line, self._describe = line, None

    def follow(self, describe: Describe) -> None:
        with self._lock:
            self._line, self._describe = None, describe

    def line(self) -> str | None:
        with self._lock:
            line, describe = self._line, self._describe
        if describe is not None:
            return describe()
        return line


async def report_while_running(
    progress: Progress, send: Send, interval: float = PROGRESS_INTERVAL
) -> None:
    """Send the current line every `interval` seconds until cancelled; the progress
    value is the seconds elapsed, which only grows (as the protocol asks)."""
    while True:
        await anyio.sleep(interval)
        line = progress.line()
        if line is not None:
            await send(round(time.monotonic() - progress.started, 1), line)
