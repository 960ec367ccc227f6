"""`writerpool serve`: the stdio MCP server, a thin face over SessionManager.

stdout carries protocol frames only (the SDK's stdio transport diverts fd 1 to
stderr while serving, so a stray print or child process cannot corrupt the wire);
logs go to stderr.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from writerpool import __version__
from writerpool.audit import audit
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.answers import within_cap
from writerpool.mcp.inflight import InFlight
from writerpool.mcp.progress import Progress, report_while_running
from writerpool.mcp.sessions import SessionManager, StartCancelled
from writerpool.mcp.stdio import checked_stdio_server
from writerpool.mcp.tools import (
    GLOSSARY,
    SESSION_ID_PATTERN,
    TEXT_PAGE_DEFAULT,
    TOOLS,
    TOOLS_BY_NAME,
    ToolSpec,
    annotations_for,
)
from writerpool.mcp.validate import check_arguments
from writerpool.report import sanitize

log = logging.getLogger(__name__)

SERVER_NAME = "writerpool"
_SESSION_ID = re.compile(SESSION_ID_PATTERN.removesuffix("$") + r"\Z")


INSTRUCTIONS = (
    "writerpool runs pi coding-agent sessions for you. " + GLOSSARY + " Call "
    "pi_capabilities_get first, start a session with pi_session_start, send work with "
    "pi_session_prompt, wait for it with pi_turn_get, and close the session with "
    "pi_session_close when done (that frees its writer)."
)
# The audit outcome of a call the client cancelled, or left by going away.
CANCELLED = "request_cancelled"
# How long shutdown waits for calls still running to end and be audited.
CALL_DRAIN_SECONDS = 15.0
# Failures a client hears about as a log line too (the tool result carries the same code).
LOGGED_FAILURES = frozenset({"session_start_failed", "session_failed", "internal_error"})


def list_tools(host_coding: bool = True) -> list[types.Tool]:
    """The tools as clients see them. `host_coding`: a coding profile may work in an
    operator's checkout, which makes a prompt destructive (unknown config: assume so)."""
    tools = []
    for spec in TOOLS:
        hints = annotations_for(spec, host_coding)
        annotations = types.ToolAnnotations(
            title=spec.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        )
        tools.append(
            types.Tool(
                name=spec.name,
                title=spec.title,
                description=spec.description,
                input_schema=spec.input_schema(),
                output_schema=spec.output_schema(),
                annotations=annotations,
            )
        )
    return tools


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": sanitize(message)}}


def to_result(body: dict[str, Any]) -> types.CallToolResult:
    """The same object as text JSON and as structuredContent; isError on failure."""
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, sort_keys=True))],
        structured_content=body,
        is_error=not body["ok"],
    )


class ToolService:
    """Dispatches validated tool calls to the manager and audits every call."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.manager: SessionManager | None = None
        self.load_error: WriterpoolError | None = None
        self.log_failures = True
        self._calls = InFlight()
        try:
            loaded = load_config(paths)
            self.manager = SessionManager(paths, loaded, load_modes(paths))
        except WriterpoolError as exc:
            # Serve anyway, so a client learns the stable code instead of a dead pipe.
            self.load_error = exc
            log.error("configuration not loaded: %s", sanitize(exc.message))

    @property
    def host_coding(self) -> bool:
        return self.manager.host_coding if self.manager is not None else True

    def _handler(
        self, spec: ToolSpec, args: dict[str, Any], progress: Progress, cancel: threading.Event
    ) -> Callable[[], dict[str, Any]]:
        if self.manager is None:
            assert self.load_error is not None
            raise self.load_error
        m = self.manager
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
        self, name: str, arguments: object, progress: Progress | None = None
    ) -> dict[str, Any]:
        """The call's body. Cancelled (the client's notifications/cancelled, or the
        client gone), the worker still finishes the call: a session it started is
        closed, and the call is audited as cancelled."""
        cancel = threading.Event()
        work = functools.partial(self._run, name, arguments, progress or Progress(), cancel)
        try:
            # Agent calls block (process start, waits); a worker thread keeps the
            # server answering other requests meanwhile.
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancel.set()
            raise

    def _run(
        self, name: str, arguments: object, progress: Progress, cancel: threading.Event
    ) -> dict[str, Any]:
        with self._calls.running(cancel):
            spec = TOOLS_BY_NAME.get(name)
            session = None
            try:
                if spec is None:
                    raise WriterpoolError("tool_unknown", "no tool of that name")
                args = check_arguments(spec, arguments)
                body = {"ok": True, **self._handler(spec, args, progress, cancel)()}
            except StartCancelled as exc:
                session = exc.session_id
                body = _error(exc.code, exc.message)
            except WriterpoolError as exc:
                body = _error(exc.code, exc.message)
            except Exception:  # the tool-call boundary: a bug must not kill the server
                log.exception("tool %s failed", spec.name if spec else "?")
                body = _error("internal_error", "an unexpected error inside writerpool")
            body = within_cap(spec.name if spec else "?", body)
            outcome = CANCELLED if cancel.is_set() else None
            self._audit(spec.name if spec else "tool_unknown", arguments, body, session, outcome)
            return body

    def _audit(
        self,
        tool: str,
        arguments: object,
        body: dict[str, Any],
        session: str | None = None,
        outcome: str | None = None,
    ) -> None:
        session = session or _session_of(arguments, body)
        writer = self.manager.writer_of(session) if self.manager and session else None
        outcome = outcome or ("ok" if body["ok"] else body["error"]["code"])
        try:
            audit(self.paths, tool_or_command=tool, outcome=outcome, session=session, writer=writer)
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


def failure_line(name: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The log line for a session failure (its code and sanitized message, no paths)."""
    if body["ok"]:
        turn = body.get("turn")
        if isinstance(turn, dict) and turn.get("status") == "failed":
            return {"tool": name, "event": "turn_failed", "turnId": turn.get("turnId"),
                    "sessionId": body.get("sessionId")}  # fmt: skip
        return None
    code = body["error"]["code"]
    if code not in LOGGED_FAILURES:
        return None
    return {"tool": name, "event": code, "message": body["error"]["message"]}


def build_server(service: ToolService) -> Server[Any]:
    tools = list_tools(service.host_coding)

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        progress = Progress()

        async def send(value: float, line: str) -> None:
            await ctx.session.report_progress(value, None, line)

        async with anyio.create_task_group() as tg:
            tg.start_soon(report_while_running, progress, send)
            body = await service.call(params.name, params.arguments, progress)
            tg.cancel_scope.cancel()
        line = failure_line(params.name, body)
        if line is not None and service.log_failures:
            notice = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level="error", logger=SERVER_NAME, data=line
                )
            )
            await ctx.session.send_notification(notice, ctx.request_id)
        return to_result(body)

    async def on_set_logging_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        # Failure lines are errors; a client asking for fewer than errors hears none.
        service.log_failures = params.level in ("debug", "info", "notice", "warning", "error")
        return types.EmptyResult()

    with warnings.catch_warnings():
        # The SDK warns that protocol 2026-07-28 drops the logging capability; the
        # clients of today negotiate earlier versions and show these lines.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            SERVER_NAME,
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            on_set_logging_level=on_set_logging_level,
        )


async def _exit_on_signal(service: ToolService) -> None:
    """SIGTERM or SIGINT: close every session within its bound, then leave at once.
    (The SDK reads stdin in a worker thread that cancellation cannot interrupt.)"""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("signal %d: closing sessions", signum)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(service.shutdown)
            sys.stderr.flush()
            os._exit(0)


async def serve(paths: Paths) -> None:
    """Serve one client over stdio until stdin closes or a signal arrives."""
    service = ToolService(paths)
    server = build_server(service)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_exit_on_signal, service)
            async with checked_stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(service.shutdown)
