"""The service's sessions that no client can reach any more: their client's token was
revoked (`service token revoke`), or they belong to a relay that was killed before it
could close them. Another client gets `session_unknown` for them, so nobody would ever
close them and their writers would stay leased until the service stops: the service
closes them itself (a close keeps the work; only the lease and the agent go), and forgets
the closed sessions of such clients, which nobody can read again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.sessions.manager import SessionManager
from writerpool.state import tokens

log = logging.getLogger(__name__)


class Orphans:
    def __init__(self, paths: Paths) -> None:
        self._paths = paths
        self._lock = threading.Lock()
        self._closing: set[str] = set()

    def sweep(self, manager: SessionManager) -> Collection[str] | None:
        """Close, each in a thread of its own, the open sessions whose client is gone,
        and forget its closed ones; the clients there are now (None when the token file
        cannot be read)."""
        try:
            tokens.prune_gone_relays(self._paths)
            clients = tokens.load(self._paths)
        except WriterpoolError:
            return None  # a corrupt token file refuses every request; it closes nothing
        for session_id in manager.orphaned(clients):  # bounded by the manager's sessions
            with self._lock:
                if session_id in self._closing:
                    continue
                self._closing.add(session_id)
            log.warning("a session's client is gone (token revoked): closing it")
            threading.Thread(target=self._close, args=(manager, session_id), daemon=True).start()
        manager.forget_gone(clients)
        return clients

    def _close(self, manager: SessionManager, session_id: str) -> None:
        try:
            manager.close(session_id)
        except WriterpoolError as exc:
            log.warning("closing a session whose client is gone: %s", exc.code)
        finally:
            with self._lock:
                self._closing.discard(session_id)
