"""The tool calls a server is running, so that shutdown can cancel them and wait for
each to finish its cleanup and its audit line."""

from __future__ import annotations

import threading
import time


class InFlight:
    """Each running call's cancel flag; thread-safe."""

    def __init__(self) -> None:
        self._flags: set[threading.Event] = set()
        self._changed = threading.Condition()

    def add(self, cancel: threading.Event) -> None:
        with self._changed:
            self._flags.add(cancel)

    def discard(self, cancel: threading.Event) -> None:
        """The call ended (its task and its threads) and was audited."""
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
