"""The checks every HTTP request passes before the MCP transport sees it.

Refused in this order, each before anything is read or started: a Host that does not
name a loopback address, or an Origin that does not (403: DNS rebinding); no valid
`Authorization: Bearer` token of a client (401); any path but the MCP endpoint (404:
so no OAuth metadata is ever advertised). The body cap is the transport's own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.http import CLIENT_KEY
from writerpool.state import tokens
from writerpool.state.service_record import ENDPOINT

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def host_is_loopback(host: str) -> bool:
    """A Host header value (`name[:port]`, `[v6]:port`) that names a loopback address."""
    parsed = urlsplit("//" + host)
    try:
        parsed.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    return parsed.hostname in LOOPBACK and not parsed.username and parsed.path == ""


def origin_is_loopback(origin: str) -> bool:
    parsed = urlsplit(origin)
    if parsed.scheme not in ("http", "https") or parsed.path not in ("", "/"):
        return False
    return host_is_loopback(parsed.netloc)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v for k, v in scope.get("headers", ()) if k.lower() == name]
    if len(values) != 1:
        return None if not values else "\x00"  # repeated: never a valid value
    return bytes(values[0]).decode("latin-1")


class Guard:
    """ASGI middleware in front of the MCP transport (see the module doc)."""

    def __init__(self, app: App, paths: Paths) -> None:
        self._app = app
        self._paths = paths
        self._refused: dict[str, int] = {}  # by code: a handful of codes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websockets: nothing to serve
        refusal = self._refusal(scope)
        if refusal is not None:
            status, code = refusal
            self._refused[code] = count = self._refused.get(code, 0) + 1
            if _power_of_ten(count):  # anyone who reaches the port can send them without end
                log.warning("refused a request: %s (%d so far)", code, count)
            await _answer(send, status, code)
            return
        await self._app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        host = _header(scope, b"host")
        if host is None or not host_is_loopback(host):
            return 403, "host_refused"
        origin = _header(scope, b"origin")
        if origin is not None and not origin_is_loopback(origin):
            return 403, "origin_refused"
        client = self._client(_header(scope, b"authorization"))
        if client is None:
            return 401, "token_refused"
        if scope.get("path") != ENDPOINT:
            return 404, "not_found"
        scope[CLIENT_KEY] = client
        return None

    def _client(self, authorization: str | None) -> str | None:
        if authorization is None or not authorization.startswith("Bearer "):
            return None
        try:
            clients = tokens.load(self._paths)  # read per request: a revocation holds at once
        except WriterpoolError:
            log.error("the service token file is corrupt: every request is refused")
            return None
        return tokens.client_of(clients, authorization.removeprefix("Bearer ").strip())


def _power_of_ten(count: int) -> bool:
    return str(count).rstrip("0") == "1"


async def _answer(send: Send, status: int, code: str) -> None:
    body = json.dumps({"error": code}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
