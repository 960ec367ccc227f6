"""The tool calls a server is running, so that shutdown can cancel them and wait for
each to finish its cleanup and its audit line."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class InFlight:
    """Each running call's cancel flag; thread-safe."""

    def __init__(self) -> None:
        self._flags: set[threading.Event] = set()
        self._changed = threading.Condition()

    @contextmanager
    def running(self, cancel: threading.Event) -> Iterator[None]:
        with self._changed:
            self._flags.add(cancel)
        try:
            yield
        finally:
            with self._changed:
                self._flags.discard(cancel)
                self._changed.notify_all()

    def cancel_all(self) -> None:
        with self._changed:
            for flag in self._flags:
                flag.set()

    def drain(self, timeout: float) -> bool:
        """Wait until no call runs, at most `timeout` seconds; False if some still do."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._flags:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True
