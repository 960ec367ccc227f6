"""`writerpool serve`: the stdio MCP server, a thin adapter over sessions.calls.ToolService.

stdout carries protocol frames only (the SDK's stdio transport diverts fd 1 to
stderr while serving, so a stray print or child process cannot corrupt the wire);
logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic_core import PydanticSerializationError

from writerpool import __version__
from writerpool.config.paths import Paths
from writerpool.mcp.http import client_of
from writerpool.mcp.relay import relay
from writerpool.mcp.stdio import checked_stdio_server
from writerpool.sessions.calls import ToolService
from writerpool.sessions.contract.tools import GLOSSARY, TOOLS, annotations_for
from writerpool.sessions.progress import Progress, report_while_running
from writerpool.state.servers import serving_alone
from writerpool.state.service_record import running

log = logging.getLogger(__name__)

SERVER_NAME = "writerpool"

INSTRUCTIONS = (
    "writerpool runs pi coding-agent sessions for you. " + GLOSSARY + " Call "
    "pi_capabilities_get first, start a session with pi_session_start, send work with "
    "pi_session_prompt, wait for it with pi_turn_get, and close the session with "
    "pi_session_close when done (that frees its writer)."
)
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


def _result(body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, sort_keys=True))],
        structured_content=body,
        is_error=not body["ok"],
    )


def to_result(name: str, body: dict[str, Any]) -> types.CallToolResult:
    """The same object as text JSON and as structuredContent; isError on failure.
    Every body went through `sendable` (sessions/contract/answers.py) already; should one
    still not encode as the transport will encode it, that call fails
    (answer_unencodable), not the transport with every other call of its client."""
    result = _result(body)
    try:
        result.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        log.error("tool %s: its answer cannot be encoded", name)
        error = {"code": "answer_unencodable", "message": "the answer could not be encoded"}
        return _result({"ok": False, "error": error})
    return result


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


def _client(ctx: ServerRequestContext[Any]) -> str | None:
    """The service's authenticated client of an HTTP request (None over stdio)."""
    return client_of(getattr(ctx.request, "scope", None))


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
            body = await service.call(params.name, params.arguments, progress, _client(ctx))
            tg.cancel_scope.cancel()
        line = failure_line(params.name, body)
        if line is not None and service.logs_failures(_client(ctx)):
            notice = types.LoggingMessageNotification(
                params=types.LoggingMessageNotificationParams(
                    level="error", logger=SERVER_NAME, data=line
                )
            )
            await ctx.session.send_notification(notice, ctx.request_id)
        return to_result(params.name, body)

    async def on_set_logging_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        # Failure lines are errors; a client asking for fewer than errors hears none.
        # Each client's own choice: over HTTP each request is an MCP session of its
        # own, so the choice is kept for the client that made it (its token's name).
        wanted = params.level in ("debug", "info", "notice", "warning", "error")
        service.set_log_failures(_client(ctx), wanted)
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
    """Serve one client over stdio until stdin closes or a signal arrives; while the
    pool service runs, relay to it instead (mcp/relay.py)."""
    record = running(paths)
    if record is not None:
        log.info("relaying to the pool service")
        await relay(paths, str(record["socket"]), int(record["pid"]))
        return
    # Marked before it loads its settings, which it keeps: `mode set` warns about it
    # (state/servers.py).
    with serving_alone(paths):
        service = ToolService(paths)
        try:
            await _serve_stdio(build_server(service), service)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(service.shutdown)


async def _serve_stdio(server: Server[Any], service: ToolService) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_exit_on_signal, service)
        async with checked_stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()
