"""The per-session provider proxy: a Unix socket in, the provider's real API out.

One `EgressHost` per process runs an asyncio loop on a daemon thread; each session
gets an `EgressSession` listening on its own socket. A request passes only with the
session's token in the API kind's own header and only on one of that kind's routes;
the token and every other credential-bearing header is dropped, the real key is set
in the kind's header, and the request goes to the provider's real base URL (TLS
verified against the host's trust store and its CA variables). The response is
relayed chunk by chunk, so server-sent events arrive as the provider sends them.

Inside the writer, pi's `baseUrl` is `http://127.0.0.1:<port>/p`: the proxy maps
`/p<rest>` to `<real base URL><rest>`, so the writer needs no part of the real URL.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from yarl import URL

from writerpool.config.models import Caps
from writerpool.config.providers import ResolvedProvider
from writerpool.egress import model
from writerpool.egress.model import EgressRecord
from writerpool.egress.rules import (
    METHOD,
    SAFE_PATH,
    downstream_headers,
    sanitize_path,
    ssl_context,
    strip_key_param,
    upstream_headers,
)
from writerpool.egress.sockets import listening_socket, unlink_socket
from writerpool.errors import WriterpoolError

__all__ = ["PREFIX", "EgressHost", "EgressSession"]

log = logging.getLogger(__name__)
T = TypeVar("T")

PREFIX = "/p"
OPEN_TIMEOUT = 10.0
# Past the request cap this many refusals are audited; later ones are only counted,
# so an agent cannot grow the audit log without bound.
AUDIT_PAST_CAP = 100
STOP_TIMEOUT = 10.0
_UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=900)


class _UploadCapReached(Exception):
    """Raised inside the request body's stream when the upload cap is passed."""


@dataclass
class _Exchange:
    """What one request did, for its audit record."""

    method: str
    path: str
    started: float = field(default_factory=time.monotonic)
    status: int = 0
    outcome: str = model.OK
    up: int = 0
    down: int = 0


def _token() -> str:
    while True:
        token = secrets.token_urlsafe(32)
        # pi treats an anthropic key containing this as an OAuth token.
        if "sk-ant-oat" not in token:
            return token


class EgressSession:
    """One session's proxy: its socket, token and caps. Made by `EgressHost.open`."""

    prefix = PREFIX

    def __init__(
        self,
        host: EgressHost,
        *,
        session: str,
        writer: str | None,
        socket_path: Path,
        upstream: ResolvedProvider,
        credential: str,
        caps: Caps,
    ) -> None:
        self.token = _token()
        self.socket_path = socket_path
        self.session = session
        self.writer = writer
        self.upstream = upstream
        self.caps = caps
        self._host = host
        self._credential = upstream.api.auth_value(credential)
        self._base = upstream.base_url.rstrip("/")
        self._routes = tuple((m, re.compile(p)) for m, p in upstream.api.routes)
        self._requests = 0  # every request, refused ones included
        self._unaudited = 0
        self._inflight = 0
        self._up = 0
        self._down = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._inode: int | None = None
        self._stopped = False

    def base_url(self, port: int) -> str:
        """pi's `baseUrl` inside the writer, where the forwarder listens on `port`."""
        return f"http://127.0.0.1:{port}{self.prefix}"

    def stop(self) -> None:
        """Stop listening, cancel requests in flight, remove the socket. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._host.run(self._stop(), STOP_TIMEOUT)
        except (WriterpoolError, TimeoutError):
            log.warning("egress: a session's proxy did not stop cleanly")
        finally:
            self._host.forget(self)
            unlink_socket(self.socket_path, self._inode)

    # -- on the loop ------------------------------------------------------------

    async def _start(self) -> None:
        sock, self._inode = listening_socket(self.socket_path)
        try:
            self._client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=ssl_context(os.environ),
                                               limit=self.caps.concurrent),
                timeout=_UPSTREAM_TIMEOUT,
                auto_decompress=False,  # bytes are relayed as the provider encoded them
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
                trust_env=False,  # no proxy variables, no .netrc credentials
            )  # fmt: skip
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                         shutdown_timeout=1.0)  # fmt: skip
            await self._runner.setup()
            await web.SockSite(self._runner, sock).start()
        except BaseException:
            sock.close()
            await self._stop()
            raise

    async def _stop(self) -> None:
        if self._unaudited:
            log.warning("egress: %d requests past the request cap were refused unaudited",
                        self._unaudited)  # fmt: skip
        for task in list(self._tasks):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._client is not None:
            await self._client.close()
            self._client = None
        unlink_socket(self.socket_path, self._inode)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        exchange = _Exchange(request.method, sanitize_path(request.raw_path))
        try:
            response = await self._exchange(request, exchange)
            if not exchange.status:
                exchange.status = response.status
            return response
        except asyncio.CancelledError:
            exchange.outcome = model.CANCELLED
            raise
        finally:
            if task is not None:
                self._tasks.discard(task)
            self._emit(exchange)

    async def _exchange(self, request: web.Request, exchange: _Exchange) -> web.StreamResponse:
        self._requests += 1
        if self._requests > self.caps.requests:
            exchange.outcome = model.CAP_REQUESTS
            return _error(429, "the session's provider cap is reached")
        refusal = self._check_token(request)
        if refusal is not None:
            exchange.outcome = refusal
            status = 401 if refusal == model.UNAUTHORIZED else 403
            return _error(status, "a valid session token is required")
        rest = self._route(request)
        if rest is None:
            exchange.outcome = model.FORBIDDEN_ROUTE
            return _error(403, "this method and path are not allowed")
        exchange.path = rest
        refusal = self._check_caps(request.content_length)
        if refusal is not None:
            exchange.outcome = refusal
            return _error(429, "the session's provider cap is reached")
        self._inflight += 1
        try:
            return await self._forward(request, rest, exchange)
        finally:
            self._inflight -= 1

    def _check_token(self, request: web.Request) -> str | None:
        header = self.upstream.api.auth_header
        values = request.headers.getall(header, [])
        if not values:
            return model.UNAUTHORIZED
        presented = values[0]
        if header == "authorization":
            scheme, _, presented = presented.partition(" ")
            if scheme.lower() != "bearer":
                return model.FORBIDDEN_TOKEN
        good = hmac.compare_digest(presented.strip().encode(), self.token.encode())
        return None if good and len(values) == 1 else model.FORBIDDEN_TOKEN

    def _route(self, request: web.Request) -> str | None:
        path = request.raw_path.partition("?")[0]
        if not path.startswith(self.prefix + "/"):
            return None
        rest = path[len(self.prefix) :]
        if not SAFE_PATH.fullmatch(rest):
            return None
        for method, pattern in self._routes:
            if request.method == method and pattern.fullmatch(rest):
                return rest
        return None

    def _check_caps(self, declared: int | None) -> str | None:
        caps = self.caps
        if self._inflight >= caps.concurrent:
            return model.CAP_CONCURRENT
        if self._up >= caps.bytes_up or (declared and self._up + declared > caps.bytes_up):
            return model.CAP_BYTES_UP
        if self._down >= caps.bytes_down:
            return model.CAP_BYTES_DOWN
        return None

    async def _body(self, request: web.Request, exchange: _Exchange) -> AsyncIterator[bytes]:
        async for chunk in request.content.iter_any():
            if self._up + len(chunk) > self.caps.bytes_up:
                exchange.outcome = model.CAP_BYTES_UP
                self._up = self.caps.bytes_up  # spent: later requests get 429
                raise _UploadCapReached
            self._up += len(chunk)
            exchange.up += len(chunk)
            yield chunk

    async def _forward(
        self, request: web.Request, rest: str, exchange: _Exchange
    ) -> web.StreamResponse:
        assert self._client is not None
        api = self.upstream.api
        headers = upstream_headers(request.headers, api.auth_header, self._credential)
        if request.content_length is not None:
            headers["Content-Length"] = str(request.content_length)
        query = strip_key_param(request.raw_path.partition("?")[2])
        url = URL(self._base + rest + (f"?{query}" if query else ""), encoded=True)
        body = self._body(request, exchange) if request.body_exists else None
        try:
            upstream = await self._client.request(
                request.method, url, headers=headers, data=body, allow_redirects=False
            )
        except (aiohttp.ClientError, OSError, TimeoutError, _UploadCapReached) as exc:
            if exchange.outcome == model.CAP_BYTES_UP:
                return _error(429, "the session's provider cap is reached")
            exchange.outcome = model.UPSTREAM_FAILED
            log.info("egress: upstream request failed (%s)", type(exc).__name__)
            return _error(502, "the provider could not be reached")
        try:
            return await self._relay(request, upstream, exchange)
        finally:
            upstream.release()

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, exchange: _Exchange
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason,
            headers=downstream_headers(upstream.headers),
        )  # fmt: skip
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        exchange.status = upstream.status
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                if self._down + len(chunk) > self.caps.bytes_down:
                    exchange.outcome = model.CAP_BYTES_DOWN
                    self._down = self.caps.bytes_down  # spent: later requests get 429
                    _cut(request)
                    return response
                self._down += len(chunk)
                exchange.down += len(chunk)
                await response.write(chunk)
            await response.write_eof()
        except ConnectionError:
            exchange.outcome = model.CANCELLED  # the client went away
        except (aiohttp.ClientError, TimeoutError):
            exchange.outcome = model.UPSTREAM_FAILED  # the provider broke off
            _cut(request)
        return response

    def _scrub(self, path: str) -> str:
        """A refused path is the agent's text: one that carries the token is not logged."""
        secrets_here = (self.token, self._credential.removeprefix("Bearer "))
        return "<refused>" if any(s and s in path for s in secrets_here) else path

    def _emit(self, exchange: _Exchange) -> None:
        if self._requests > self.caps.requests + AUDIT_PAST_CAP:
            self._unaudited += 1
            return
        record = EgressRecord(
            session=self.session,
            writer=self.writer,
            method=exchange.method if METHOD.fullmatch(exchange.method) else "<refused>",
            path=self._scrub(exchange.path),
            status=exchange.status,
            outcome=exchange.outcome,
            bytes_up=exchange.up,
            bytes_down=exchange.down,
            duration_ms=int((time.monotonic() - exchange.started) * 1000),
        )
        self._host.emit(record)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message}}, status=status)


def _cut(request: web.Request) -> None:
    """End the client's connection mid-response, so a cut stream is never taken as whole."""
    if request.transport is not None:
        request.transport.close()


class EgressHost:
    """Owns the loop thread and every session's proxy of this process."""

    def __init__(self, audit: Callable[[EgressRecord], None] | None = None) -> None:
        self._audit = audit
        self._loop = asyncio.new_event_loop()
        self._sessions: list[EgressSession] = []
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="writerpool-egress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
        finally:
            self._loop.close()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run coro on the loop and wait for it (from any thread but the loop's)."""
        if self._loop.is_closed() or not self._thread.is_alive():
            coro.close()
            raise WriterpoolError("egress_failed", "the provider proxy host is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def forget(self, proxy: EgressSession) -> None:
        with self._lock:
            if proxy in self._sessions:
                self._sessions.remove(proxy)

    def open(
        self,
        *,
        session: str,
        writer: str | None,
        socket_path: Path,
        upstream: ResolvedProvider,
        credential: str,
        caps: Caps,
    ) -> EgressSession:
        """Start a session's proxy; returns once its socket (0600) listens."""
        with self._lock:
            if self._closed:
                raise WriterpoolError("egress_failed", "the provider proxy host is closed")
            proxy = EgressSession(
                self, session=session, writer=writer, socket_path=socket_path,
                upstream=upstream, credential=credential, caps=caps,
            )  # fmt: skip
            self.run(proxy._start(), OPEN_TIMEOUT)
            self._sessions.append(proxy)
        return proxy

    def emit(self, record: EgressRecord) -> None:
        """Hand a record to the audit callable off the loop (it may block on a lock)."""
        if self._audit is None:
            return
        future = self._loop.run_in_executor(None, self._audit, record)
        future.add_done_callback(_log_audit_failure)

    def close(self) -> None:
        """Stop every session (their sockets removed) and the loop thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions, self._sessions = self._sessions, []
        for proxy in sessions:
            proxy.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=STOP_TIMEOUT)


def _log_audit_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("egress: an audit record could not be written: %s", future.exception())
