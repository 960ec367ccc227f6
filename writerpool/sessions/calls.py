"""Tool calls, transport-free: validated, dispatched to the session manager, audited.

Every transport (stdio, HTTP) is a thin adapter over one ToolService.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from writerpool.audit import audit
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.report import sanitize
from writerpool.sessions.contract.answers import sendable
from writerpool.sessions.contract.arguments import (
    SESSION_ID_PATTERN,
    CapabilitiesGet,
    SessionAbort,
    SessionClose,
    SessionGet,
    SessionList,
    SessionPrompt,
    SessionStart,
    ToolArguments,
    TurnGet,
)
from writerpool.sessions.contract.tools import TOOLS_BY_NAME, ToolSpec
from writerpool.sessions.inflight import InFlight
from writerpool.sessions.manager import SessionManager, StartCancelled, TurnWatch
from writerpool.sessions.orphans import Orphans
from writerpool.sessions.progress import Progress
from writerpool.sessions.reload import SettingsWatch
from writerpool.sessions.seats import CLIENT_CALLS, Seats
from writerpool.sessions.waits import until_ended

if TYPE_CHECKING:
    from writerpool.sessions.owned import OwnedSessions

log = logging.getLogger(__name__)

_SESSION_ID = re.compile(SESSION_ID_PATTERN.removesuffix("$") + r"\Z")
# The audit outcome of a call the client cancelled, or left by going away.
CANCELLED = "request_cancelled"
# How long shutdown waits for calls still running to end and be audited.
CALL_DRAIN_SECONDS = 15.0


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": sanitize(message)}}


@dataclass(frozen=True)
class _Wait:
    """A call that waits for a turn before it answers (with `then`, in a thread)."""

    watch: TurnWatch
    seconds: float
    then: Callable[[], dict[str, Any]]


@dataclass
class _Record:
    """One call, from its admission until its task and threads have all ended."""

    name: str
    arguments: object
    client: str | None
    cancel: threading.Event = field(default_factory=threading.Event)
    audited: bool = False


class ToolService:
    """Dispatches validated tool calls to the manager and audits every call."""

    def __init__(self, paths: Paths, reload: bool = False) -> None:
        """`reload`: the service: re-read the settings when they change and keep the
        workspaces' warm writers; `serve` keeps what it loaded at start and no warm
        writer (nothing of its outlives its client)."""
        self.paths = paths
        self.manager: SessionManager | None = None
        self.load_error: WriterpoolError | None = None
        self._quiet: set[str | None] = set()  # clients that asked for no failure lines
        self._quiet_lock = threading.Lock()
        self._calls = InFlight()
        self._seats = Seats()
        self._watch = SettingsWatch(paths) if reload else None
        self._orphans = Orphans(paths) if reload else None
        self._reload_lock = threading.Lock()
        try:
            loaded = load_config(paths)
            self._set_manager(SessionManager(paths, loaded, load_modes(paths), warm=reload))
        except WriterpoolError as exc:
            # Serve anyway, so a client learns the stable code instead of a dead pipe.
            self.load_error = exc
            log.error("configuration not loaded: %s", sanitize(exc.message))

    def _refresh(self) -> None:
        """Before each call (and each round of the warm pool): the settings as they are
        now, if they changed and are valid; sessions whose client is gone are closed."""
        if self._watch is None:
            return
        if self._orphans is not None and self.manager is not None:
            clients = self._orphans.sweep(self.manager)
            if clients is not None:  # a gone client's choice of log lines goes with it
                with self._quiet_lock:
                    self._quiet.intersection_update(clients)
        with self._reload_lock:
            now = self._watch.changed()
            fresh = self._watch.load(now) if now is not None else None
            if fresh is None:
                return
            if self.manager is None:
                self._set_manager(SessionManager(self.paths, *fresh, warm=True))
                self.load_error = None
            else:
                self.manager.reload(*fresh)

    def _set_manager(self, manager: SessionManager) -> None:
        self.manager = manager
        if self._watch is not None:
            manager.reload_policy = "on-change"
            manager.keep_warm(self._refresh)

    @property
    def host_coding(self) -> bool:
        return self.manager.host_coding if self.manager is not None else True

    def _handle(
        self,
        args: ToolArguments,
        progress: Progress,
        cancel: threading.Event,
        client: str | None,
    ) -> dict[str, Any] | _Wait:
        """The tool's work on its validated arguments (the model says which tool)."""
        if self.manager is None:
            assert self.load_error is not None
            raise self.load_error
        m = self.manager.for_client(client)
        match args:
            case CapabilitiesGet():
                return m.capabilities()
            case SessionStart():
                return m.start(args.workspace, args.execution_profile, args.base, progress,
                               cancel)  # fmt: skip
            case SessionList():
                return m.list()
            case SessionGet():
                return m.get(args.session_id)
            case SessionPrompt():
                return m.prompt(args.session_id, args.message)
            case TurnGet():
                return self._turn_get(m, args, progress)
            case SessionAbort():
                return m.abort(args.session_id)
            case SessionClose():
                return m.close(args.session_id)
        raise TypeError(f"no handler for {type(args).__name__}")

    @staticmethod
    def _turn_get(m: OwnedSessions, args: TurnGet, progress: Progress) -> dict[str, Any] | _Wait:
        """The turn now, or a wait for its end first (the wait holds no thread)."""
        sid, turn, offset, limit = args.session_id, args.turn_id, args.offset, args.limit
        watch = m.turn_watch(sid, turn, progress) if args.wait_seconds > 0 else None
        if watch is None:
            return m.turn(sid, turn, offset, limit)
        return _Wait(watch, args.wait_seconds, lambda: m.turn(sid, turn, offset, limit))

    def logs_failures(self, client: str | None) -> bool:
        """Whether `client` hears about session failures as log lines (its own choice)."""
        with self._quiet_lock:
            return client not in self._quiet

    def set_log_failures(self, client: str | None, enabled: bool) -> None:
        with self._quiet_lock:
            if enabled:
                self._quiet.discard(client)
            else:
                self._quiet.add(client)

    async def call(
        self,
        name: str,
        arguments: object,
        progress: Progress | None = None,
        client: str | None = None,
    ) -> dict[str, Any]:
        """The call's body. Its steps run on threads of the client's own (seats.py);
        waiting for a turn holds none. Cancelled (the client's notifications/cancelled,
        or the client gone), a step that began still finishes: a session it started is
        closed, and the call is audited as cancelled. `client`: the service's
        authenticated client (None over stdio), who owns the sessions it starts."""
        record = _Record(name, arguments, client)
        seat = self._seats.admit(client, name, functools.partial(self._ended, record),
                                 refuse=client is not None)  # fmt: skip
        if seat is None:
            body = sendable(
                name, _error("calls_busy", f"this client has {CLIENT_CALLS} calls running already")
            )
            self._audit(name if name in TOOLS_BY_NAME else "tool_unknown", arguments, body,
                        client=client)  # fmt: skip
            return body
        self._calls.add(record.cancel)
        progress = progress or Progress()
        async with seat:
            try:
                answer = await seat.in_thread(functools.partial(self._run, record, progress))
                if isinstance(answer, _Wait):
                    await until_ended(answer.watch, answer.seconds)
                    then = functools.partial(self._answer, record, TOOLS_BY_NAME[name], answer.then)
                    answer = await seat.in_thread(then)
                assert not isinstance(answer, _Wait)
                return answer
            except anyio.get_cancelled_exc_class():
                record.cancel.set()
                raise

    def _run(self, record: _Record, progress: Progress) -> dict[str, Any] | _Wait:
        spec = TOOLS_BY_NAME.get(record.name)

        def work() -> dict[str, Any] | _Wait:
            if spec is None:
                raise WriterpoolError("tool_unknown", "no tool of that name")
            args = spec.parse(record.arguments)
            self._refresh()
            return self._handle(args, progress, record.cancel, record.client)

        return self._answer(record, spec, work)

    def _answer(
        self,
        record: _Record,
        spec: ToolSpec | None,
        work: Callable[[], dict[str, Any] | _Wait],
    ) -> dict[str, Any] | _Wait:
        """The body of `work` (a wait, passed on), made sendable and audited."""
        session = None
        try:
            result = work()
            if isinstance(result, _Wait):
                return result
            body = {"ok": True, **result}
        except StartCancelled as exc:
            session = exc.session_id
            body = _error(exc.code, exc.message)
        except WriterpoolError as exc:
            body = _error(exc.code, exc.message)
        except Exception:  # the tool-call boundary: a bug must not kill the server
            log.exception("tool %s failed", spec.name if spec else "?")
            body = _error("internal_error", "an unexpected error inside writerpool")
        tool = spec.name if spec else "tool_unknown"
        body = sendable(tool, body)
        outcome = CANCELLED if record.cancel.is_set() else None
        self._audit(tool, record.arguments, body, session, outcome, record.client)
        record.audited = True
        return body

    def _ended(self, record: _Record) -> None:
        """The call's task and threads have all ended (from whichever ended last): a call
        cancelled before it answered is audited so."""
        try:
            if not record.audited:
                tool = record.name if record.name in TOOLS_BY_NAME else "tool_unknown"
                body = _error(CANCELLED, "the client cancelled the call")
                self._audit(tool, record.arguments, body, outcome=CANCELLED, client=record.client)
        finally:
            self._calls.discard(record.cancel)

    def _audit(
        self,
        tool: str,
        arguments: object,
        body: dict[str, Any],
        session: str | None = None,
        outcome: str | None = None,
        client: str | None = None,
    ) -> None:
        session = session or _session_of(arguments, body)
        writer = self.manager.writer_of(session) if self.manager and session else None
        outcome = outcome or ("ok" if body["ok"] else body["error"]["code"])
        warm = tool == "pi_session_start" and bool(
            self.manager and session and self.manager.claimed_warm(session)
        )
        try:
            audit(self.paths, tool_or_command=tool, outcome=outcome, session=session,
                  writer=writer, client=client, warm=warm)  # fmt: skip
        except OSError as exc:
            log.error("audit log not written: %s", sanitize(str(exc)))

    def shutdown(self) -> None:
        """Cancel the calls still running, close every session (a start in flight
        included), and let the calls write their audit lines, each step bounded."""
        self._calls.cancel_all()
        if self.manager is not None:
            self.manager.close_all()
        self._calls.drain(CALL_DRAIN_SECONDS)
        if self.manager is not None:
            self.manager.shutdown()


def _session_of(arguments: object, body: dict[str, Any]) -> str | None:
    if body.get("ok") and isinstance(body.get("session"), dict):
        return str(body["session"]["sessionId"])
    if isinstance(arguments, dict):
        sid = arguments.get("sessionId")
        if isinstance(sid, str) and _SESSION_ID.match(sid):
            return sid
    return None
