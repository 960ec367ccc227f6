"""MCP over streamable HTTP: the SDK's transport, stateless (writerpool's own session ids
carry all state), with a cap on each request's body, carrying the session core as the
stdio server does (mcp/server.py). The pool service (service/app.py) serves it on
loopback behind its Guard, which puts the authenticated client's name in the request's
ASGI scope under CLIENT_KEY; the tool handlers read it from there."""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

# The largest request body the transport reads (a prompt is capped well below this).
MAX_BODY_BYTES = 1024 * 1024
# Where the ASGI scope carries the authenticated client's name to the tool handlers.
CLIENT_KEY = "writerpool.client"


def streamable_http(server: Server[Any]) -> StreamableHTTPSessionManager:
    """The transport for `server`; run it (`.run()`) and serve `.handle_request`."""
    return StreamableHTTPSessionManager(
        server, stateless=True, max_request_body_size=MAX_BODY_BYTES
    )


def client_of(scope: object) -> str | None:
    """The authenticated client an HTTP request's scope names (None over stdio)."""
    client = scope.get(CLIENT_KEY) if isinstance(scope, dict) else None
    return client if isinstance(client, str) else None
