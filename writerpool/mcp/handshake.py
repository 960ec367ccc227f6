"""A bounded MCP handshake through a server command line, or with the pool service's
URL and a header helper: initialize, list the tools, call pi_capabilities_get. It
starts no session and so never reaches a provider.

Used by `writerpool register --verify` (the command, or the URL, a client registered)
and by `writerpool writer verify` (the `writerpool serve` a session would use).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from writerpool.proc import CommandFailed, clean_env, run
from writerpool.report import sanitize
from writerpool.sessions.contract.tools import TOOLS

DEFAULT_TIMEOUT = 30.0
EXPECTED_TOOLS = frozenset(spec.name for spec in TOOLS)
PROBE_TOOL = "pi_capabilities_get"
# The server's state and cache follow these; clean_env() drops them, a handshake keeps them.
_XDG = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")
_MAX_PAGES = 10
# The SDK logs a traceback for every malformed stdout line; the handshake reports that
# itself, so keep the SDK's logger from falling back to printing on stderr.
logging.getLogger("mcp.client.stdio").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class HandshakeResult:
    """code: mcp_verified | mcp_failed | mcp_unsupported | mcp_timeout. message holds no
    paths; tools are the names the server listed (empty when it never got that far)."""

    code: str
    message: str
    tools: tuple[str, ...] = ()
    capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == "mcp_verified"


class _Contract(Exception):
    """The server answered, but not as writerpool serve must (mcp_unsupported)."""


class _Refused(Exception):
    """The server answered pi_capabilities_get with a domain error (mcp_failed)."""


# What ends a handshake early and is the server's fault, not writerpool's.
_HANDLED = (OSError, MCPError, httpx2.HTTPError, _Contract, _Refused)
# The header helper runs as Codex runs it: through a shell, with HOME and PATH only.
HELPER_ENV = ("HOME", "PATH")


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a handshake gives the server: the minimal one, the XDG locations
    that decide its state directory, and the registration's own variables."""
    env = clean_env({k: os.environ[k] for k in _XDG if k in os.environ})
    env.update(extra or {})
    return env


def handshake(command: Sequence[str], env: Mapping[str, str], timeout: float) -> HandshakeResult:
    """Run the handshake against `command` with `env`, within `timeout` seconds (the
    server's shutdown afterwards is bounded separately by the SDK, about two seconds)."""
    if not command:
        return HandshakeResult("mcp_failed", "no server command")
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        result = anyio.run(_bounded, list(command), dict(env), timeout, errlog)
        if result.code == "mcp_failed" and not result.tools:
            result = _with_stderr(result, errlog)
    return result


async def _bounded(
    command: list[str], env: dict[str, str], timeout: float, errlog: TextIO
) -> HandshakeResult:
    try:
        with anyio.fail_after(timeout), anyio.CancelScope() as garbled:
            return await _exchange(command, env, errlog, garbled.cancel)
        # Only a non-frame line on stdout cancels that scope (see on_message).
        return HandshakeResult(
            "mcp_failed", "the server wrote something other than protocol frames on stdout"
        )
    except (TimeoutError, BaseExceptionGroup, *_HANDLED) as exc:
        return _ended(exc, timeout)


def http_handshake(url: str, helper: str, timeout: float) -> HandshakeResult:
    """The handshake a client registered over HTTP makes: its header helper run as the
    client runs it, then the exchange at `url` with that header, within `timeout`."""
    env = {k: os.environ[k] for k in HELPER_ENV if k in os.environ}
    try:
        done = run(["/bin/sh", "-c", helper], env=env, timeout=timeout, check=False)
    except CommandFailed:
        return HandshakeResult("mcp_timeout", f"the header helper did not answer in {timeout:g} s")
    headers = _headers(done.stdout)
    if done.returncode != 0 or headers is None:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        why = sanitize(said[-1])[:300] if said else f"exit {done.returncode}"
        return HandshakeResult("mcp_failed", f"the header helper gave no header: {why}")
    return anyio.run(_bounded_http, url, headers, timeout)


def _headers(out: bytes) -> dict[str, str] | None:
    try:
        value = json.loads(out)
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return None
    return {str(k): v for k, v in value.items()}


async def _bounded_http(url: str, headers: dict[str, str], timeout: float) -> HandshakeResult:
    try:
        with anyio.fail_after(timeout):
            async with (
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout)) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                return await _checks(session)
    except (TimeoutError, BaseExceptionGroup, *_HANDLED) as exc:
        return _ended(exc, timeout)


def _ended(exc: BaseException, timeout: float) -> HandshakeResult:
    """What ended a handshake (stdio or HTTP) as its result; anything else is raised."""
    if isinstance(exc, TimeoutError):
        return HandshakeResult("mcp_timeout", f"no complete handshake within {timeout:g} s")
    # The client's task groups wrap whatever ends the exchange.
    leaf = _leaf(exc)
    if not isinstance(leaf, _HANDLED):
        raise exc
    return _classify(leaf)


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _classify(exc: BaseException) -> HandshakeResult:
    if isinstance(exc, _Contract):
        return HandshakeResult("mcp_unsupported", str(exc))
    if isinstance(exc, _Refused):
        return HandshakeResult("mcp_failed", str(exc), tuple(sorted(EXPECTED_TOOLS)))
    if isinstance(exc, OSError):
        reason = exc.strerror or type(exc).__name__
        return HandshakeResult("mcp_failed", f"the server could not be started ({reason})")
    if isinstance(exc, httpx2.HTTPStatusError):
        status = exc.response.status_code
        return HandshakeResult("mcp_failed", f"the service answered HTTP {status}")
    if isinstance(exc, httpx2.HTTPError):
        return HandshakeResult(
            "mcp_failed", f"the service cannot be reached ({type(exc).__name__})"
        )
    return HandshakeResult(
        "mcp_failed",
        "the server closed the connection or answered with a protocol error: " + sanitize(str(exc)),
    )


async def _exchange(
    command: list[str], env: dict[str, str], errlog: TextIO, on_garbage: Callable[[], None]
) -> HandshakeResult:
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def on_message(message: types.ServerNotification | Exception) -> None:
        # A line on stdout that is not a frame arrives here: the server is broken, and
        # waiting for the deadline would only hide that.
        if isinstance(message, Exception):
            on_garbage()
        await anyio.lowlevel.checkpoint()

    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        return await _checks(session)


async def _checks(session: ClientSession) -> HandshakeResult:
    init = await session.initialize()
    tools = await _list_tools(session)
    _check_tools(tools)
    body = await _probe(session)
    name = init.server_info.name
    return HandshakeResult(
        "mcp_verified",
        f"{name} answered initialize, listed the {len(tools)} pi_* tools and {PROBE_TOOL}",
        tuple(tools),
        body,
    )


async def _list_tools(session: ClientSession) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            return names
    raise _Contract("tools/list never ended")


def _check_tools(names: list[str]) -> None:
    if len(names) != len(set(names)) or set(names) != EXPECTED_TOOLS:
        missing = sorted(EXPECTED_TOOLS - set(names))
        extra = sorted(set(names) - EXPECTED_TOOLS)
        raise _Contract(
            f"tools/list does not hold exactly the {len(EXPECTED_TOOLS)} pi_* tools "
            f"(missing: {', '.join(missing) or 'none'}; other: {', '.join(extra) or 'none'})"
        )


async def _probe(session: ClientSession) -> dict[str, Any]:
    result = await session.call_tool(PROBE_TOOL, {})
    if not isinstance(result, types.CallToolResult):
        raise _Contract(f"{PROBE_TOOL} did not return a tool result")
    body = result.structured_content
    if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
        raise _Contract(f"{PROBE_TOOL} returned no structured {{ok: …}} body")
    if _text_body(result) != body:
        raise _Contract(f"{PROBE_TOOL}'s text and structured content differ")
    if not body["ok"]:
        error = body.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        raise _Refused(f"{PROBE_TOOL} answered {code or 'an error'}: the server cannot serve")
    return body


def _text_body(result: types.CallToolResult) -> object:
    texts = [part.text for part in result.content if isinstance(part, types.TextContent)]
    if len(texts) != 1:
        return None
    try:
        return json.loads(texts[0])
    except ValueError:
        return None


def _with_stderr(result: HandshakeResult, errlog: TextIO) -> HandshakeResult:
    """Name the server's last stderr line (sanitized): it usually says why it died."""
    errlog.seek(0)
    lines = [line.strip() for line in errlog.read().splitlines() if line.strip()]
    if not lines:
        return result
    last = sanitize(lines[-1])[:300]
    return HandshakeResult(result.code, f"{result.message}; server said: {last}", result.tools)
