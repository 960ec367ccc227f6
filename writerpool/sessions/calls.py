"""Tool calls, transport-free: validated, dispatched to the session manager, audited.

Every transport (stdio, HTTP) is a thin adapter over one ToolService.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import anyio

from writerpool.audit import audit
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.answers import sendable
from writerpool.mcp.tools import SESSION_ID_PATTERN, TEXT_PAGE_DEFAULT, TOOLS_BY_NAME, ToolSpec
from writerpool.mcp.validate import check_arguments
from writerpool.report import sanitize
from writerpool.sessions.inflight import InFlight
from writerpool.sessions.manager import SessionManager, StartCancelled
from writerpool.sessions.orphans import Orphans
from writerpool.sessions.progress import Progress
from writerpool.sessions.reload import SettingsWatch

log = logging.getLogger(__name__)

_SESSION_ID = re.compile(SESSION_ID_PATTERN.removesuffix("$") + r"\Z")
# The audit outcome of a call the client cancelled, or left by going away.
CANCELLED = "request_cancelled"
# How long shutdown waits for calls still running to end and be audited.
CALL_DRAIN_SECONDS = 15.0
# Calls one client of the service may have running at once, counted until their worker
# thread ends (a call the client cancelled or left still runs to its end). Past it a call
# is refused at once (calls_busy): no client can hold the worker threads of the others.
CLIENT_CALLS = 16
# A few more for the calls that end what the client started, so that a client whose
# calls all wait can still abort or close its session (these are quick).
ENDING_CALLS = 4
ENDING_TOOLS = frozenset({"pi_session_abort", "pi_session_close"})


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": sanitize(message)}}


class ToolService:
    """Dispatches validated tool calls to the manager and audits every call."""

    def __init__(self, paths: Paths, reload: bool = False) -> None:
        """`reload`: the service: re-read the settings when they change and keep the
        workspaces' warm writers; `serve` keeps what it loaded at start and no warm
        writer (nothing of its outlives its client)."""
        self.paths = paths
        self.manager: SessionManager | None = None
        self.load_error: WriterpoolError | None = None
        self.log_failures = True
        self._calls = InFlight()
        self._watch = SettingsWatch(paths) if reload else None
        self._orphans = Orphans(paths) if reload else None
        self._running: dict[str, int] = {}  # the service's clients' calls still running
        self._running_lock = threading.Lock()
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
            self._orphans.sweep(self.manager)
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

    def _handler(
        self,
        spec: ToolSpec,
        args: dict[str, Any],
        progress: Progress,
        cancel: threading.Event,
        client: str | None,
    ) -> Callable[[], dict[str, Any]]:
        if self.manager is None:
            assert self.load_error is not None
            raise self.load_error
        m = self.manager.for_client(client)
        sid = args.get("sessionId", "")
        handlers: dict[str, Callable[[], dict[str, Any]]] = {
            "pi_capabilities_get": m.capabilities,
            "pi_session_start": lambda: m.start(
                args["workspace"],
                args.get("executionProfile"),
                args.get("base"),
                progress,
                cancel,
            ),
            "pi_session_list": m.list,
            "pi_session_get": lambda: m.get(sid),
            "pi_session_prompt": lambda: m.prompt(sid, args["message"]),
            "pi_turn_get": lambda: m.turn(
                sid,
                args["turnId"],
                float(args.get("waitSeconds", 0)),
                int(args.get("offset", 0)),
                int(args.get("limit", TEXT_PAGE_DEFAULT)),
                progress,
            ),
            "pi_session_abort": lambda: m.abort(sid),
            "pi_session_close": lambda: m.close(sid),
        }
        return handlers[spec.name]

    async def call(
        self,
        name: str,
        arguments: object,
        progress: Progress | None = None,
        client: str | None = None,
    ) -> dict[str, Any]:
        """The call's body. Cancelled (the client's notifications/cancelled, or the
        client gone), the worker still finishes the call: a session it started is
        closed, and the call is audited as cancelled. `client`: the service's
        authenticated client (None over stdio), who owns the sessions it starts."""
        cancel = threading.Event()
        work = functools.partial(self._run, name, arguments, progress or Progress(), cancel, client)
        if client is not None:
            if not self._admit(client, name):
                body = sendable(
                    name,
                    _error("calls_busy", f"this client has {CLIENT_CALLS} calls running already"),
                )
                self._audit(name if name in TOOLS_BY_NAME else "tool_unknown", arguments, body,
                            client=client)  # fmt: skip
                return body
            work = functools.partial(self._counted, work, client)
        try:
            # Agent calls block (process start, waits); a worker thread keeps the
            # server answering other requests meanwhile.
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise

    def _admit(self, client: str, tool: str) -> bool:
        allowed = CLIENT_CALLS + (ENDING_CALLS if tool in ENDING_TOOLS else 0)
        with self._running_lock:
            if self._running.get(client, 0) >= allowed:
                return False
            self._running[client] = self._running.get(client, 0) + 1
            return True

    def _counted(self, work: Callable[[], dict[str, Any]], client: str) -> dict[str, Any]:
        """`work` in its worker thread; the client's count drops when the thread ends."""
        try:
            return work()
        finally:
            with self._running_lock:
                self._running[client] -= 1
                if not self._running[client]:
                    del self._running[client]

    def _run(
        self,
        name: str,
        arguments: object,
        progress: Progress,
        cancel: threading.Event,
        client: str | None,
    ) -> dict[str, Any]:
        with self._calls.running(cancel):
            spec = TOOLS_BY_NAME.get(name)
            session = None
            try:
                if spec is None:
                    raise WriterpoolError("tool_unknown", "no tool of that name")
                args = check_arguments(spec, arguments)
                self._refresh()
                body = {"ok": True, **self._handler(spec, args, progress, cancel, client)()}
            except StartCancelled as exc:
                session = exc.session_id
                body = _error(exc.code, exc.message)
            except WriterpoolError as exc:
                body = _error(exc.code, exc.message)
            except Exception:  # the tool-call boundary: a bug must not kill the server
                log.exception("tool %s failed", spec.name if spec else "?")
                body = _error("internal_error", "an unexpected error inside writerpool")
            body = sendable(spec.name if spec else "tool_unknown", body)
            outcome = CANCELLED if cancel.is_set() else None
            tool = spec.name if spec else "tool_unknown"
            self._audit(tool, arguments, body, session, outcome, client)
            return body

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
