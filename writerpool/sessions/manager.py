"""Sessions of one server (`writerpool serve` alone, or the pool service): start, prompt,
turns, abort, close.

A `serve` running alone keeps the configuration and execution modes it was built with
(`reloadPolicy` "restart-required"); the service hands it each valid change through
`reload` (sessions/reload.py). Every public method returns a JSON-ready dict (the tool body
without `ok`) or raises WriterpoolError with a stable code; nothing returned holds
a path, a prompt, a credential or a provider error.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from writerpool import __version__
from writerpool.config.models import Config, LoadedConfig
from writerpool.config.modes import ExecutionModes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.sessions.contract.answers import LIST_BYTES, LIST_NAMED, fit_list
from writerpool.sessions.contract.arguments import TEXT_PAGE_DEFAULT
from writerpool.sessions.launch import Agent, Launcher
from writerpool.sessions.placement import (
    SessionPlan,
    plan_session,
    profile_capabilities,
    workspace_capabilities,
)
from writerpool.sessions.progress import Progress
from writerpool.sessions.session import Session
from writerpool.sessions.turns import now_iso, progress_line, turn_view
from writerpool.sessions.work import CloneRefs

if TYPE_CHECKING:
    from writerpool.pool.claims.warm import WarmPool
    from writerpool.sessions.owned import OwnedSessions

# Subscribes a wake to a turn's end (an agent's `watch` for one turn); see turn_watch.
TurnWatch = Callable[[Callable[[], None]], Callable[[], None]]

log = logging.getLogger(__name__)

# Closed sessions stay answerable as tombstones, this many at most (manager.close).
MAX_TOMBSTONES = 256
# How long shutdown waits for starts in flight to finish and close themselves: a
# container start's own bound, plus a margin for the lease and the fence.
START_DRAIN_SECONDS = 120.0


class StartCancelled(WriterpoolError):
    """The client cancelled pi_session_start (or went away): what it started is closed."""

    def __init__(self, session_id: str | None) -> None:
        closed = "its session was closed" if session_id else "nothing was started"
        super().__init__("request_cancelled", f"the client cancelled the start; {closed}")
        self.session_id = session_id


class SessionManager:
    """All sessions of one server; thread-safe (tool calls run in worker threads)."""

    def __init__(
        self, paths: Paths, loaded: LoadedConfig, modes: ExecutionModes, warm: bool = False
    ) -> None:
        """`warm`: keep the workspaces' warm writers (the service only: a `serve` ends
        with its client, and no process of its may outlive it)."""
        self._paths = paths
        self._loaded = loaded
        self._modes = modes
        self._warm: WarmPool | None = None
        if warm:
            from writerpool.pool.claims.warm import WarmPool  # noqa: PLC0415 - Podman code, service only

            self._warm = WarmPool(paths, loaded, modes=modes)
        self._launcher = Launcher(paths, loaded, warm=self._warm)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self._started = threading.Condition(self._lock)
        self._starting = 0  # starts in flight
        self._shutting_down = False
        self.host_coding = _host_coding(loaded.config, modes)
        self.reload_policy = "restart-required"

    def reload(self, loaded: LoadedConfig, modes: ExecutionModes) -> None:
        """New settings for sessions started from now on; open sessions keep theirs."""
        with self._lock:
            self._loaded, self._modes = loaded, modes
            self._launcher.reload(loaded)
            if self._warm is not None:
                self._warm.reload(loaded, modes)
            self.host_coding = _host_coding(loaded.config, modes)

    def keep_warm(self, refresh: Callable[[], object]) -> None:
        """Start keeping the warm writers (a thread of the pool's own); `refresh` is the
        service's settings check, run before each fill."""
        if self._warm is not None:
            self._warm.start(refresh)

    # -- read-only tools -------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        config = self._loaded.config
        return {
            "version": __version__,
            "configFingerprint": self._loaded.fingerprint,
            "reloadPolicy": self.reload_policy,
            "workspaces": self._warm_counted(workspace_capabilities(config, self._modes)),
            "profiles": profile_capabilities(config),
        }

    def _warm_counted(self, workspaces: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """With the warm writers held now (the service), beside the configured count."""
        if self._warm is not None:
            for item in workspaces:  # bounded by the configured workspaces
                if "warm" in item:
                    item["warmReady"] = len(self._warm.warm_names(item["alias"]))
                    item["warmReadyByHost"] = self._warm.ready_by_host(item["alias"])
        return workspaces

    def list(self, owner: str | None = None) -> dict[str, Any]:
        with self._lock:
            sessions = [s for s in self._sessions.values() if s.owner == owner]
        views = [s.view(LIST_NAMED) for s in sessions]
        shown, omitted = fit_list(views, LIST_BYTES)
        return {"sessions": shown, "omitted": omitted}

    def orphaned(self, clients: Collection[str]) -> tuple[str, ...]:
        """Open sessions owned by a client that is not among `clients` (the service's)."""
        with self._lock:
            sessions = tuple(self._sessions.values())
        gone = [s for s in sessions if s.owner is not None and s.owner not in clients]
        return tuple(s.id for s in gone if s.closed_at is None)

    def forget_gone(self, clients: Collection[str]) -> None:
        """Forget the closed sessions of clients that are gone: nobody can read them
        again, and each `serve` relay is a client of its own."""
        present: set[str | None] = {None, *clients}  # None: stdio's one client
        with self._lock:
            for sid, session in list(self._sessions.items()):
                if session.closed_at is not None and session.owner not in present:
                    del self._sessions[sid]

    def owner_of(self, session_id: str) -> str | None:
        """The client that owns the session (session_unknown when there is none)."""
        return self._find(session_id).owner

    def for_client(self, client: str | None) -> OwnedSessions:
        """The manager as `client` sees it: its own sessions only."""
        from writerpool.sessions.owned import OwnedSessions  # noqa: PLC0415 - a cycle

        return OwnedSessions(self, client)

    def get(self, session_id: str) -> dict[str, Any]:
        return {"session": self._find(session_id).view()}

    def writer_of(self, session_id: str) -> str | None:
        """The session's writer, for the audit log (None: unknown session or host)."""
        with self._lock:
            session = self._sessions.get(session_id)
        return session.writer if session is not None else None

    def claimed_warm(self, session_id: str) -> bool:
        """Whether the session's start claimed a warm writer, for the audit log."""
        with self._lock:
            session = self._sessions.get(session_id)
        return session is not None and session.warm

    # -- session life ----------------------------------------------------------------

    def start(
        self,
        workspace: str,
        profile: str | None = None,
        base: str | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Start a session owned by `owner`. `cancel` set (the client cancelled or left):
        the start stops before the agent starts, or the session is closed at once
        (container gone, lease released) and StartCancelled names it."""
        plan = plan_session(self._loaded.config, self._modes, workspace, profile, base)
        session_id = "s-" + secrets.token_hex(8)
        cancel = cancel or threading.Event()
        with self._lock:
            if self._shutting_down:
                raise WriterpoolError("session_start_failed", "the server is shutting down")
            self._starting += 1
        try:
            if cancel.is_set():
                raise StartCancelled(None)
            session = self._launch(plan, session_id, progress or Progress())
            session.owner = owner
            with self._lock:
                late = self._shutting_down
                self._sessions[session_id] = session
            if cancel.is_set() or late:
                # Nobody will learn this session's id: it must not hold a writer.
                self.close(session_id)
                if cancel.is_set():
                    raise StartCancelled(session_id)
                raise WriterpoolError("session_start_failed", "the server is shutting down")
        finally:
            with self._lock:
                self._starting -= 1
                self._started.notify_all()
        return {"session": session.view()}

    def _launch(self, plan: SessionPlan, session_id: str, progress: Progress) -> Session:
        progress.follow(lambda: _starting_line(plan, progress))
        launched = self._launcher.launch(plan, session_id)
        session = Session(session_id, plan, launched, now_iso(), writer=launched.writer,
                          base=launched.base, warm=launched.warm)  # fmt: skip
        if launched.writer is not None:
            if launched.slot is not None and launched.slot.prepared:
                progress.say(f"writer {launched.writer}: {launched.slot.prepared}")
            progress.say(f"writer {launched.writer} started")
            state = launched.slot.state if launched.slot is not None else None
            if state is not None and state.baseline is not None:
                session.start_refs = CloneRefs.of_baseline(state.baseline)
        return session

    def close(self, session_id: str) -> dict[str, Any]:
        session = self._find(session_id)
        with session.lock:
            if session.closed_at is None:
                # Marked closed first (no new prompt or abort gets through); the agent
                # stays reachable for turn reads until its final turns are kept.
                session.closed_at = now_iso()
                with self._lock:  # tombstones are forgotten in the order they closed
                    if self._sessions.get(session_id) is session:
                        self._sessions.move_to_end(session_id)
                launched = session.launched
                if launched is not None:
                    try:
                        self._launcher.stop(launched, self._close_seconds())
                    finally:
                        session.keep_final_turns(launched.agent)
                        session.closing = launched.seen
                        session.keep_final_work()
                        session.launched = None
        self._forget_old_tombstones()
        return {"session": session.view()}

    def close_all(self) -> None:
        """Close every open session in parallel, bounded by pool.session_close_seconds."""
        with self._lock:
            self._shutting_down = True
            # A start in flight closes its own session once it sees the flag.
            if not self._started.wait_for(lambda: self._starting == 0, START_DRAIN_SECONDS):
                log.error("a session start did not end within its bound")
            open_ids = [s.id for s in self._sessions.values() if s.closed_at is None]
        threads = [
            threading.Thread(target=self.close, args=(sid,), daemon=True) for sid in open_ids
        ]
        for thread in threads:
            thread.start()
        # Each close bounds itself; this extra margin only guards against a stuck step.
        deadline = self._close_seconds() + 5.0
        for thread in threads:
            thread.join(deadline)
            if thread.is_alive():
                log.error("a session did not close within its bound")

    def shutdown(self) -> None:
        """After close_all: stop the warm writers (leases released), then remove this
        server's scratch space and egress processes."""
        try:
            if self._warm is not None:
                self._warm.close()
        finally:
            self._launcher.shutdown()

    # -- turns -----------------------------------------------------------------------

    def prompt(self, session_id: str, message: str) -> dict[str, Any]:
        session = self._find(session_id)
        with session.lock:
            agent = self._open_agent(session)
            last = session.last_turn()
            if last is not None and agent.turn(session.turns[last]).status == "running":
                raise WriterpoolError("session_busy", "the session already runs a turn")
            agent_turn = agent.prompt(message)
            turn_id = f"t-{len(session.turns) + 1}"
            session.turns[turn_id] = agent_turn
        return {"sessionId": session_id, "turnId": turn_id, "status": "running"}

    def turn(
        self,
        session_id: str,
        turn_id: str,
        offset: int = 0,
        limit: int = TEXT_PAGE_DEFAULT,
    ) -> dict[str, Any]:
        """The turn as it is now (a caller that waits first asks turn_watch)."""
        session = self._find(session_id)
        agent_turn = session.turns.get(turn_id)
        if agent_turn is None:
            raise WriterpoolError("turn_unknown", "no such turn in this session")
        launched = session.launched
        if launched is None:
            final = session.final_turns.get(turn_id)
            if final is None:
                raise WriterpoolError("turn_unknown", "the closed session no longer has it")
            view = turn_view(turn_id, final, offset, limit)
            return {"sessionId": session_id, "turn": view, "work": session.work()}
        view = turn_view(turn_id, launched.agent.turn(agent_turn), offset, limit)
        denied = launched.grant.denied()
        if denied:
            # What the allowlist proxy refused in this session so far: the agent's
            # client sees why an install failed without reading the audit log.
            view["egressDenied"] = denied
        return {"sessionId": session_id, "turn": view, "work": session.work()}

    def turn_watch(
        self, session_id: str, turn_id: str, progress: Progress | None = None
    ) -> TurnWatch | None:
        """How a caller waits for the turn to end without a thread (sessions/waits.py):
        None when it does not run now (the answer is due at once). `progress` follows
        the turn meanwhile."""
        session = self._find(session_id)
        agent_turn = session.turns.get(turn_id)
        if agent_turn is None:
            raise WriterpoolError("turn_unknown", "no such turn in this session")
        launched = session.launched
        if launched is None:
            return None
        agent = launched.agent
        if agent.turn(agent_turn).status != "running" or not agent.alive:
            return None
        if progress is not None:
            progress.follow(lambda: progress_line(agent.turn(agent_turn), time.time()))
        return functools.partial(agent.watch, agent_turn)

    def abort(self, session_id: str) -> dict[str, Any]:
        session = self._find(session_id)
        with session.lock:
            agent = self._open_agent(session)
            last = session.last_turn()
            running = last is not None and agent.turn(session.turns[last]).status == "running"
            if running:
                agent.abort()
        return {"sessionId": session_id, "turnId": last if running else None, "aborted": running}

    # -- helpers ---------------------------------------------------------------------

    def _find(self, session_id: str) -> Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise WriterpoolError("session_unknown", "no such session")
        return session

    def _open_agent(self, session: Session) -> Agent:
        if session.launched is None or session.closed_at is not None:
            raise WriterpoolError("session_closed", "the session is closed")
        agent = session.launched.agent
        if not agent.alive:
            raise WriterpoolError("session_failed", "the session's agent exited; close it")
        if session.launched.grant.lost:
            raise WriterpoolError(
                "session_egress_lost", "the session's way to its provider is gone; close it"
            )
        return agent

    def _close_seconds(self) -> float:
        return self._loaded.config.pool.session_close_seconds

    def _forget_old_tombstones(self) -> None:
        """At most MAX_TOMBSTONES closed sessions are kept. Past that, the one that
        closed first of the owner holding the most goes: a client that closes many
        loses its own, never another's below an even share, and a gone client's go in
        their turn. Bounded by the closed sessions and their owners (the service's
        clients, 64 at most)."""
        with self._lock:
            closed: dict[str | None, list[str]] = {}
            for sid, session in self._sessions.items():  # in the order they closed
                if session.closed_at is not None:
                    closed.setdefault(session.owner, []).append(sid)
            for _ in range(sum(map(len, closed.values())) - MAX_TOMBSTONES):
                del self._sessions[max(closed.values(), key=len).pop(0)]


def _starting_line(plan: SessionPlan, progress: Progress) -> str:
    seconds = int(time.monotonic() - progress.started)
    if plan.placement == "container":
        where = (
            f"leasing a writer of workspace {plan.workspace} and starting "
            f"{plan.profile.agent} in it"
        )
    else:
        where = f"starting {plan.profile.agent} for workspace {plan.workspace} on the host"
    return f"{where}, {seconds} s"


def _host_coding(config: Config, modes: ExecutionModes) -> bool:
    """Whether a coding profile would work in an operator's checkout (host or unset mode)."""
    for workspace in config.workspaces:
        for name, profile in config.profiles.items():
            if profile.permission != "coding":
                continue
            try:
                plan = plan_session(config, modes, workspace, name, None)
            except WriterpoolError:
                continue
            if plan.placement == "host":
                return True
    return False
