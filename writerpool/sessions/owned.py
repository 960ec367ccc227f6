"""The session manager as one client sees it: a session belongs to the client that
started it, and any other client gets `session_unknown` for it (never a hint that it
exists)."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from writerpool.errors import WriterpoolError
from writerpool.sessions.progress import Progress
from writerpool.sessions.waits import Watch


class Manager(Protocol):
    """What a client's view needs of the session manager (sessions/manager.py, which
    hands out these views: a Protocol, so this module need not import it)."""

    def owner_of(self, session_id: str) -> str | None: ...
    def capabilities(self) -> dict[str, Any]: ...
    def list(self, owner: str | None) -> dict[str, Any]: ...
    def start(
        self,
        workspace: str,
        profile: str | None,
        base: str | None,
        progress: Progress,
        cancel: threading.Event,
        owner: str | None,
    ) -> dict[str, Any]: ...
    def get(self, session_id: str) -> dict[str, Any]: ...
    def prompt(self, session_id: str, message: str) -> dict[str, Any]: ...
    def turn(self, session_id: str, turn_id: str, offset: int, limit: int) -> dict[str, Any]: ...
    def turn_watch(self, session_id: str, turn_id: str, progress: Progress) -> Watch | None: ...
    def abort(self, session_id: str) -> dict[str, Any]: ...
    def close(self, session_id: str) -> dict[str, Any]: ...


class OwnedSessions:
    def __init__(self, manager: Manager, client: str | None) -> None:
        self._m = manager
        self._client = client

    def _mine(self, session_id: str) -> str:
        if self._m.owner_of(session_id) != self._client:
            raise WriterpoolError("session_unknown", "no such session")
        return session_id

    def capabilities(self) -> dict[str, Any]:
        return self._m.capabilities()

    def list(self) -> dict[str, Any]:
        return self._m.list(self._client)

    def start(
        self,
        workspace: str,
        profile: str | None,
        base: str | None,
        progress: Progress,
        cancel: threading.Event,
    ) -> dict[str, Any]:
        return self._m.start(workspace, profile, base, progress, cancel, owner=self._client)

    def get(self, session_id: str) -> dict[str, Any]:
        return self._m.get(self._mine(session_id))

    def prompt(self, session_id: str, message: str) -> dict[str, Any]:
        return self._m.prompt(self._mine(session_id), message)

    def turn(self, session_id: str, turn_id: str, offset: int, limit: int) -> dict[str, Any]:
        return self._m.turn(self._mine(session_id), turn_id, offset, limit)

    def turn_watch(self, session_id: str, turn_id: str, progress: Progress) -> Watch | None:
        return self._m.turn_watch(self._mine(session_id), turn_id, progress)

    def abort(self, session_id: str) -> dict[str, Any]:
        return self._m.abort(self._mine(session_id))

    def close(self, session_id: str) -> dict[str, Any]:
        return self._m.close(self._mine(session_id))
