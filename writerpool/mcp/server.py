"""`writerpool serve`: the stdio MCP server, a thin face over SessionManager.

stdout carries protocol frames only (the SDK's stdio transport diverts fd 1 to
stderr while serving, so a stray print or child process cannot corrupt the wire);
logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from writerpool import __version__
from writerpool.audit import audit
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.sessions import SessionManager
from writerpool.mcp.stdio import checked_stdio_server
from writerpool.mcp.tools import SESSION_ID_PATTERN, TOOLS, TOOLS_BY_NAME, ToolSpec
from writerpool.mcp.validate import check_arguments
from writerpool.report import sanitize

log = logging.getLogger(__name__)

SERVER_NAME = "writerpool"
_SESSION_ID = re.compile(SESSION_ID_PATTERN.removesuffix("$") + r"\Z")


def list_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.input_schema(),
            annotations=types.ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.hints.read_only,
                destructive_hint=spec.hints.destructive,
                idempotent_hint=spec.hints.idempotent,
                open_world_hint=spec.hints.open_world,
            ),
        )
        for spec in TOOLS
    ]


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
        try:
            loaded = load_config(paths)
            self.manager = SessionManager(paths, loaded, load_modes(paths))
        except WriterpoolError as exc:
            # Serve anyway, so a client learns the stable code instead of a dead pipe.
            self.load_error = exc
            log.error("configuration not loaded: %s", sanitize(exc.message))

    def _handler(self, spec: ToolSpec, args: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        if self.manager is None:
            assert self.load_error is not None
            raise self.load_error
        m = self.manager
        sid = args.get("sessionId", "")
        handlers: dict[str, Callable[[], dict[str, Any]]] = {
            "pi_capabilities_get": m.capabilities,
            "pi_session_start": lambda: m.start(
                args["workspace"], args.get("executionProfile"), args.get("base")
            ),
            "pi_session_list": m.list,
            "pi_session_get": lambda: m.get(sid),
            "pi_session_prompt": lambda: m.prompt(sid, args["message"]),
            "pi_turn_get": lambda: m.turn(sid, args["turnId"], float(args.get("waitSeconds", 0))),
            "pi_session_abort": lambda: m.abort(sid),
            "pi_session_close": lambda: m.close(sid),
        }
        return handlers[spec.name]

    async def call(self, name: str, arguments: object) -> dict[str, Any]:
        spec = TOOLS_BY_NAME.get(name)
        try:
            if spec is None:
                raise WriterpoolError("tool_unknown", "no tool of that name")
            args = check_arguments(spec, arguments)
            handler = self._handler(spec, args)
            # Agent calls block (process start, waits); a worker thread keeps the
            # server answering other requests meanwhile.
            body = {"ok": True, **await anyio.to_thread.run_sync(handler, abandon_on_cancel=True)}
        except WriterpoolError as exc:
            body = _error(exc.code, exc.message)
        except Exception:  # the tool-call boundary: a bug must not kill the server
            log.exception("tool %s failed", spec.name if spec else "?")
            body = _error("internal_error", "an unexpected error inside writerpool")
        self._audit(spec.name if spec else "tool_unknown", arguments, body)
        return body

    def _audit(self, tool: str, arguments: object, body: dict[str, Any]) -> None:
        session = _session_of(arguments, body)
        writer = self.manager.writer_of(session) if self.manager and session else None
        outcome = "ok" if body["ok"] else body["error"]["code"]
        try:
            audit(self.paths, tool_or_command=tool, outcome=outcome, session=session, writer=writer)
        except OSError as exc:
            log.error("audit log not written: %s", sanitize(str(exc)))

    def shutdown(self) -> None:
        if self.manager is not None:
            self.manager.close_all()
            self.manager.shutdown()


def _session_of(arguments: object, body: dict[str, Any]) -> str | None:
    if body.get("ok") and isinstance(body.get("session"), dict):
        return str(body["session"]["sessionId"])
    if isinstance(arguments, dict):
        sid = arguments.get("sessionId")
        if isinstance(sid, str) and _SESSION_ID.match(sid):
            return sid
    return None


def build_server(service: ToolService) -> Server[Any]:
    tools = list_tools()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return to_result(await service.call(params.name, params.arguments))

    return Server(
        SERVER_NAME,
        version=__version__,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
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
