"""An asyncio loop on a daemon thread of the server, for a listener that does not yet
run in its session's egress process (the allowlist proxy, `egress.connect`).

The provider proxy never runs here: it runs in a process of its own per session
(`egress.worker`). A listener moves out of this loop by becoming a kind of
`egress.spec.ListenerSpec` served by `egress.worker.LISTENERS`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from writerpool.errors import WriterpoolError

T = TypeVar("T")
STOP_TIMEOUT = 10.0


class InProcessLoop:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="writerpool-egress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
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
