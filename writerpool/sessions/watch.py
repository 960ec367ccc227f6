"""How a coding session on a writer watches its host: once the host is unreachable (a
connection over SSH lost; this machine's own host never is), the writer is released
and the session's running turn fails with the host's code instead of a bare exit."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from writerpool.runtime.host import WriterHost
from writerpool.sessions.turns import Snapshot

log = logging.getLogger(__name__)

# How often a session's host is checked between Podman calls.
WATCH_SECONDS = 1.0
HOST_LOST_ERROR = (
    "writer_host_unreachable: the connection to the writer's host was lost; the work stays "
    "on the host, the writer is released; close the session"
)


def lost(agent: Any, release: Any) -> None:
    """The host is gone: pi's attachment ends (its turn with it), the writer is released."""
    try:
        agent.close(5.0)
    finally:
        release()


@dataclass
class HostWatch:
    """Watches a session's host: once it is unreachable, the writer is released
    (pool/claims/lease_ready.py WriterSlot.release: its lease freed, its work left on the host) and
    the session's failed turn says why."""

    host: WriterHost
    release: Any  # Callable[[], object]: the writer's release
    lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="host-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Bounded by the session: ends when it stops or its connection is lost.
        while not self._stop.wait(WATCH_SECONDS):
            if self.host.connected():
                continue
            self.lost = True
            log.warning("host %s lost during a session; its writer is released", self.host.name)
            with contextlib.suppress(Exception):
                self.release()
            return

    def confirm(self) -> bool:
        """Whether the host is lost, asked now: pi's attachment (over SSH a channel of the
        connection) can end before the next look; the release stays the watch's."""
        if not self.lost and not self.host.connected():
            self.lost = True
        return self.lost

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=WATCH_SECONDS * 5)


class WatchedAgent:
    """pi in a writer's container: its turns end with the host's error when the host is
    lost, instead of a bare exit."""

    def __init__(self, agent: Any, watch: HostWatch) -> None:
        self._agent = agent
        self._watch = watch

    @property
    def alive(self) -> bool:
        return bool(self._agent.alive)

    def _why(self, snap: Snapshot) -> Snapshot:
        if snap.status not in ("failed", "aborted") or not self._watch.confirm():
            return snap
        updated: Snapshot = replace(snap, status="failed", error=HOST_LOST_ERROR)  # type: ignore[type-var]
        return updated

    def prompt(self, message: str) -> str:
        return str(self._agent.prompt(message))

    def abort(self) -> None:
        self._agent.abort()

    def turn(self, turn_id: str) -> Snapshot:
        return self._why(self._agent.turn(turn_id))

    def wait(self, turn_id: str, timeout: float) -> Snapshot:
        return self._why(self._agent.wait(turn_id, timeout))

    def watch(self, turn_id: str, wake: Callable[[], None]) -> Callable[[], None]:
        # The host lost ends pi's attachment, and so the turn: the watch is pi's own.
        forget: Callable[[], None] = self._agent.watch(turn_id, wake)
        return forget

    def turns(self) -> list[Snapshot]:
        return [self._why(snap) for snap in self._agent.turns()]

    def close(self, timeout: float) -> None:
        self._agent.close(timeout)

    def __getattr__(self, name: str) -> Any:
        # What else a session asks of pi (its stderr tail, its pid) is the agent's own.
        return getattr(self._agent, name)
