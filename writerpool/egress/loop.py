"""An asyncio loop on a daemon thread of the server, for a listener that does not yet
run in its session's egress process (the allowlist proxy, `egress.connect`), and a
listener run on such a loop (`LocalListener`: the isolation control's open relay,
benches, tests).

The provider proxy never runs here: it runs in a process of its own per session
(`egress.worker`). A listener moves out of this loop by becoming a kind of
`egress.spec.ListenerSpec` served by `egress.worker.LISTENERS`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, Generic, Protocol, TypeVar

from writerpool.egress.watchdog import arm, watch
from writerpool.errors import WriterpoolError

T = TypeVar("T")
STOP_TIMEOUT = 10.0
log = logging.getLogger(__name__)


class LoopRunner(Protocol):
    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T: ...


class Listener(Protocol):
    async def start(self) -> int: ...

    async def stop(self) -> None: ...


L = TypeVar("L", bound=Listener)


class LocalListener(Generic[L]):
    """A listener on a loop of this process, started and stopped from any other thread."""

    def __init__(self, runner: LoopRunner, listener: L) -> None:
        self.listener = listener
        self._runner = runner
        self._stopped = False

    def start(self) -> None:
        self._runner.run(self.listener.start(), STOP_TIMEOUT)

    def stop(self) -> None:
        """Stop listening, end open connections, remove the socket. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._runner.run(self.listener.stop(), STOP_TIMEOUT)
        except (WriterpoolError, TimeoutError):
            log.warning("egress: a listener did not stop cleanly")


class InProcessLoop:
    def __init__(self) -> None:
        arm()  # from the main thread only: elsewhere the watchdog's signal does nothing
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="writerpool-egress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        watching = watch(self._loop)  # egress.watchdog
        try:
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
            watching.set()
            self._loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run coro on the loop and wait for it (from any thread but the loop's)."""
        if self._loop.is_closed() or not self._thread.is_alive():
            coro.close()
            raise WriterpoolError("egress_failed", "the egress loop is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=STOP_TIMEOUT)
