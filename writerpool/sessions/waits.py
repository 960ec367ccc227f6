"""Waiting for a turn to end in the event loop, holding no worker thread.

A `pi_turn_get` with `waitSeconds` may wait a minute, and a client may send many: in a
thread each, a few clients' waits would hold every thread the others need. The agent
calls a wake from the thread that ends the turn (its reader of pi's output); the wake
hands the end to the event loop. The servers run on asyncio (uvicorn's loop, and
anyio.run's default for `serve`), whose loop takes a call from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import anyio

# Subscribes a wake to a turn's end; returns the call that forgets it (manager.TurnWatch).
Watch = Callable[[Callable[[], None]], Callable[[], None]]


async def until_ended(watch: Watch, seconds: float) -> bool:
    """Wait until the watched turn ends or `seconds` pass; True when it ended.
    Cancellable at any moment (the client cancelled, or went away)."""
    loop = asyncio.get_running_loop()
    ended = anyio.Event()

    def wake() -> None:  # any thread
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(ended.set)

    forget = watch(wake)
    try:
        with anyio.move_on_after(seconds):
            await ended.wait()
    finally:
        forget()
    return ended.is_set()
