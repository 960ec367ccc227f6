"""The HTTP server under every scripted provider: threads, TCP or a Unix socket, JSON
and Server-Sent Events, and a record of each request for tests to assert on.

Each wire (writerpool.agent.scripted: chat completions; scripted_messages: Anthropic
Messages; scripted_responses: OpenAI Responses) is a `ScriptHandler` subclass named by
its `ScriptedServer` subclass. A request's body is never logged or kept: the record holds
its method, path, headers, model, whether it streamed and the tools it declared.
"""

from __future__ import annotations

import json
import os
import socketserver
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Self

from writerpool.agent.scripted_script import Script

MAX_BODY = 32 * 1024 * 1024
# The headers a key can arrive in; the last request's values are kept for tests.
AUTH_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")


@dataclass(frozen=True)
class RecordedRequest:
    """What a test may assert about one request (never its body)."""

    method: str
    path: str
    headers: dict[str, str]
    model: str | None = None
    stream: bool = False
    tools: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class ScriptHandler(BaseHTTPRequestHandler):
    """Shared plumbing; a wire overrides `post` (and `get` for its listings)."""

    server: _TcpServer | _UnixServer
    protocol_version = "HTTP/1.1"

    @property
    def provider(self) -> ScriptedServer:
        return self.server.provider

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines are not worth a log, and bodies must never reach one."""

    def address_string(self) -> str:
        return "local"  # a Unix socket's peer has no address

    def do_GET(self) -> None:
        self.get()

    def do_HEAD(self) -> None:
        self.note()
        self.send_json(200, {})

    def do_POST(self) -> None:
        self.post()

    def get(self) -> None:
        """A probe (the base URL, a health path): a harmless empty answer."""
        self.note()
        self.send_json(200, {})

    def post(self) -> None:
        self.note()
        self.send_json(404, {"error": {"message": "not found"}})

    def send_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def read_json(self) -> dict[str, Any] | None:
        """The request's JSON object body (markers looked for), or None after a 400;
        a refused request is recorded before it is answered (a client's next request
        then never races its record)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            self.note()
            self.send_json(400, {"error": {"message": "a JSON body is required"}})
            return None
        raw = self.rfile.read(length)
        self.provider.look_for_markers(raw)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self.note()
            self.send_json(400, {"error": {"message": "the body is not a JSON object"}})
            return None
        return body

    def note(self, body: dict[str, Any] | None = None, **extra: Any) -> None:
        """Record this request (with what its body declared, when it has one)."""
        body = body or {}
        names = tool_names(body)
        model = body.get("model")
        self.provider.note_request(
            RecordedRequest(
                method=self.command, path=self.path,
                headers={k.lower(): str(v) for k, v in self.headers.items()},
                model=None if model is None else str(model), stream=bool(body.get("stream")),
                tools=names, extra=extra,
            )
        )  # fmt: skip

    def send_events(self, events: Iterable[bytes], pause: float = 0.0) -> None:
        """Stream Server-Sent Events (each already framed), pausing between them; a
        client that goes away (an aborted turn) ends the stream quietly."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # No length is known ahead; the stream ends when the connection closes.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for i, event in enumerate(events):
                if i and pause and self.provider.stopping.wait(pause):
                    return
                self.wfile.write(event)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return


def tool_names(body: dict[str, Any]) -> tuple[str, ...]:
    """The names of the tools a request declares (a function's name, else its type)."""
    tools = body.get("tools")
    return tuple(
        str(t.get("name") or (t.get("function") or {}).get("name") or t.get("type"))
        for t in (tools if isinstance(tools, list) else [])
        if isinstance(t, dict)
    )


def sse(event: str | None, data: object) -> bytes:
    """One Server-Sent Event: an optional `event:` line and one `data:` line."""
    head = b"" if event is None else b"event: " + event.encode() + b"\n"
    payload = data if isinstance(data, str) else json.dumps(data)
    return head + b"data: " + payload.encode() + b"\n\n"


class _TcpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    provider: ScriptedServer


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    provider: ScriptedServer


class ScriptedServer:
    """The server, run on a background thread: `start()`, `.port`, `stop()`.

    On TCP (`host`, `port`; 0 picks a free port) or on a Unix socket (`unix_socket`),
    the way a writer's in-container forwarder reaches the host."""

    handler_class: ClassVar[type[ScriptHandler]] = ScriptHandler
    thread_name: ClassVar[str] = "scripted-provider"

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",  # writers reach it through their session's proxy
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        unix_socket: Path | None = None,
    ) -> None:
        self.script = script
        self.tls = tls
        self.host = host
        self.unix_socket = unix_socket
        self._requested_port = port
        self._server: _TcpServer | _UnixServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.requests: list[RecordedRequest] = []
        self.request_count = 0
        self.last_model: str | None = None
        self.last_authorization: str | None = None
        self.last_auth: dict[str, str] = {}
        self.last_path: str | None = None
        # Strings a test watches for anywhere in a request (a planted system prompt);
        # only whether each was seen is kept, never the body.
        self.markers: set[str] = set()
        self.seen_markers: set[str] = set()

    def look_for_markers(self, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        found = {m for m in self.markers if m in text}
        if found:
            with self._lock:
                self.seen_markers |= found

    def note_request(self, request: RecordedRequest) -> None:
        """Keep the request's record, its path and the headers a key can be in."""
        auth = {name: request.headers[name] for name in AUTH_HEADERS if request.headers.get(name)}
        with self._lock:
            self.requests.append(request)
            self.last_path = request.path
            self.last_auth = auth

    def record(self, model: str, authorization: str | None) -> None:
        """Count one answered model request."""
        with self._lock:
            self.request_count += 1
            self.last_model = model
            self.last_authorization = authorization

    def recorded(self, path_prefix: str = "") -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(path_prefix)]

    @property
    def port(self) -> int:
        if self._server is None or self.unix_socket is not None:
            raise RuntimeError("the scripted provider is not started on TCP")
        address = self._server.server_address
        assert isinstance(address, tuple)
        return int(address[1])

    def base_url(self, host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}/v1"

    def _bind(self) -> _TcpServer | _UnixServer:
        if self.unix_socket is None:
            return _TcpServer((self.host, self._requested_port), self.handler_class)
        if self.unix_socket.is_socket():
            os.unlink(self.unix_socket)
        return _UnixServer(str(self.unix_socket), self.handler_class)

    def start(self) -> Self:
        if self._server is not None:
            return self
        self.stopping.clear()
        server = self._bind()
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        server.provider = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.02,), name=self.thread_name, daemon=True
        )  # a short poll: stop() waits for the loop to see it
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping.set()  # ends slow streams promptly
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.unix_socket is not None and self.unix_socket.is_socket():
            os.unlink(self.unix_socket)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
