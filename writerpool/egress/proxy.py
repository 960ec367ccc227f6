"""The provider proxy: a Unix socket in, the provider's real API out.

It runs inside the session's own egress process (`egress.worker`), behind that
process's `Gate`. A request passes only with the session's token in the API kind's
own header and only on one of that kind's routes; the token and every other
credential-bearing header is dropped, the real key is set in the kind's header, and
the request goes to the provider's real base URL (TLS verified against the host's
trust store and its CA variables). The response is relayed chunk by chunk, so
server-sent events arrive as the provider sends them. Each connection carries one
request; a client that stops reading or sending for `IDLE_SECONDS` is cut.

Inside the writer, pi's `baseUrl` is `http://127.0.0.1:<port>/p`: the proxy maps
`/p<rest>` to `<real base URL><rest>`, so the writer needs no part of the real URL.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from yarl import URL

from writerpool.egress import model
from writerpool.egress.gate import Gate, GateLimits
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
from writerpool.egress.sockets import listening_socket
from writerpool.egress.spec import ProviderListenerSpec

__all__ = ["PREFIX", "ProviderProxy"]

log = logging.getLogger(__name__)
# aiohttp's server logs each request it cannot parse, with a traceback that repeats the
# agent's own bytes, on the server's stderr; the agent could send them without end. The
# client gets aiohttp's 400 either way; nothing of it is logged.
_QUIET = logging.getLogger("writerpool.egress.http")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
T = TypeVar("T")

PREFIX = "/p"
# Past the request cap this many refusals are audited; later ones are only counted,
# so an agent cannot grow the audit log without bound.
AUDIT_PAST_CAP = 100
# A client that neither sends nor reads for this long is cut (the provider's own
# silences are bounded by the upstream timeout instead).
IDLE_SECONDS = 60.0
_UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=900)


class _UploadCapReached(Exception):
    """Raised inside the request body's stream when the upload cap is passed."""


class _ClientIdle(Exception):
    """The client sent or read nothing for IDLE_SECONDS."""


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


class ProviderProxy:
    """One session's provider proxy, inside that session's egress process."""

    prefix = PREFIX

    def __init__(
        self,
        spec: ProviderListenerSpec,
        *,
        session: str,
        writer: str | None,
        emit: Callable[[EgressRecord], None],
    ) -> None:
        self.token = spec.token
        self.socket_name = spec.socket
        self.session = session
        self.writer = writer
        self.upstream = spec.upstream()
        self.caps = spec.caps.caps()
        self._emit_record = emit
        self._credential = self.upstream.api.auth_value(spec.credential)
        self._base = self.upstream.base_url.rstrip("/")
        self._routes = tuple((m, re.compile(p)) for m, p in self.upstream.api.routes)
        self._requests = 0  # every request, refused ones included
        self._unaudited = 0
        self._failed = 0
        self._inflight = 0
        self._up = 0
        self._down = 0
        self._server: web.Server | None = None
        self._gate: Gate | None = None
        self._client: aiohttp.ClientSession | None = None
        self._ended: dict[object, asyncio.Future[None]] = {}

    async def start(self) -> int:
        """Listen on the socket (a name in the working directory); returns its inode."""
        sock, inode = listening_socket(Path(self.socket_name))
        self._client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ssl_context(os.environ),
                                           limit=self.caps.concurrent),
            timeout=_UPSTREAM_TIMEOUT,
            auto_decompress=False,  # bytes are relayed as the provider encoded them
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
            trust_env=False,  # no proxy variables, no .netrc credentials
        )  # fmt: skip
        self._server = _Server(self._handle, self._ended, access_log=None, logger=_QUIET,
                               max_line_size=8190, max_field_size=8190, max_headers=64)  # fmt: skip
        self._gate = Gate("provider", sock, self._serve, GateLimits())
        self._gate.start()
        return inode

    async def stop(self) -> None:
        """Close every connection (requests in flight are cancelled), stop listening."""
        if self._unaudited:
            log.warning("egress: %d requests past the request cap were refused unaudited",
                        self._unaudited)  # fmt: skip
        if self._failed > 1:
            log.warning("egress: %d proxy requests failed in all", self._failed)
        if self._server is not None:
            await self._server.shutdown(1.0)
        if self._gate is not None:
            await self._gate.stop()
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def _serve(self, conn: socket.socket, head: bytes) -> None:
        """Hand a connection whose header block arrived to the HTTP server, until it ends."""
        assert self._server is not None
        loop = asyncio.get_running_loop()
        transport, handler = await loop.connect_accepted_socket(self._server, sock=conn)
        ended = self._ended.setdefault(handler, loop.create_future())
        try:
            handler.data_received(head)
            await ended
        finally:
            self._ended.pop(handler, None)
            transport.abort()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        exchange = _Exchange(request.method, sanitize_path(request.raw_path))
        try:
            response = await self._exchange(request, exchange)
            if not exchange.status:
                exchange.status = response.status
            return response
        except asyncio.CancelledError:
            exchange.outcome = model.CANCELLED
            raise
        except Exception:  # the audit never calls a request that failed here a success
            exchange.outcome, exchange.status = model.FAILED, 500
            self._failed += 1
            if self._failed == 1:  # once per session: an agent could repeat it at will
                log.exception("egress: a proxy request failed")
            raise
        finally:
            self._emit(exchange)

    async def _exchange(self, request: web.BaseRequest, exchange: _Exchange) -> web.StreamResponse:
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

    def _check_token(self, request: web.BaseRequest) -> str | None:
        header = self.upstream.api.auth_header
        values = request.headers.getall(header, [])
        if not values:
            return model.UNAUTHORIZED
        presented = values[0]
        if header == "authorization":
            scheme, _, presented = presented.partition(" ")
            if scheme.lower() != "bearer":
                return model.FORBIDDEN_TOKEN
        # Header bytes that are not UTF-8 arrive surrogate-escaped: compared as sent.
        sent = presented.strip().encode("utf-8", "surrogateescape")
        good = hmac.compare_digest(sent, self.token.encode())
        return None if good and len(values) == 1 else model.FORBIDDEN_TOKEN

    def _route(self, request: web.BaseRequest) -> str | None:
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

    async def _body(self, request: web.BaseRequest, exchange: _Exchange) -> AsyncIterator[bytes]:
        while chunk := await _idle_bounded(request.content.readany()):
            if self._up + len(chunk) > self.caps.bytes_up:
                exchange.outcome = model.CAP_BYTES_UP
                self._up = self.caps.bytes_up  # spent: later requests get 429
                raise _UploadCapReached
            self._up += len(chunk)
            exchange.up += len(chunk)
            yield chunk

    async def _forward(
        self, request: web.BaseRequest, rest: str, exchange: _Exchange
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
        except (aiohttp.ClientError, OSError, TimeoutError, _UploadCapReached, _ClientIdle) as exc:
            if exchange.outcome == model.CAP_BYTES_UP:
                return _error(429, "the session's provider cap is reached")
            if isinstance(exc, _ClientIdle):
                exchange.outcome = model.CANCELLED
                return _error(408, "the request body stalled")
            exchange.outcome = model.UPSTREAM_FAILED
            log.info("egress: upstream request failed (%s)", type(exc).__name__)
            return _error(502, "the provider could not be reached")
        try:
            return await self._relay(request, upstream, exchange)
        finally:
            upstream.release()

    async def _relay(
        self, request: web.BaseRequest, upstream: aiohttp.ClientResponse, exchange: _Exchange
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason,
            headers=downstream_headers(upstream.headers),
        )  # fmt: skip
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        exchange.status = upstream.status
        try:
            response.force_close()  # one request per connection: see `Gate`
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                if self._down + len(chunk) > self.caps.bytes_down:
                    exchange.outcome = model.CAP_BYTES_DOWN
                    self._down = self.caps.bytes_down  # spent: later requests get 429
                    _cut(request)
                    return response
                self._down += len(chunk)
                exchange.down += len(chunk)
                await _idle_bounded(response.write(chunk))
            await response.write_eof()
        except (ConnectionError, _ClientIdle):
            exchange.outcome = model.CANCELLED  # the client went away or stopped reading
            _cut(request)
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
        self._emit_record(record)


def _error(status: int, message: str) -> web.Response:
    response = web.json_response({"error": {"message": message}}, status=status)
    response.force_close()
    return response


async def _idle_bounded(step: Coroutine[Any, Any, T]) -> T:
    """One read from or write to the client, cut when it takes longer than IDLE_SECONDS."""
    try:
        return await asyncio.wait_for(step, IDLE_SECONDS)
    except TimeoutError as exc:
        raise _ClientIdle from exc


def _cut(request: web.BaseRequest) -> None:
    """End the client's connection mid-response, so a cut stream is never taken as whole."""
    if request.transport is not None:
        request.transport.close()


class _Server(web.Server):
    """The low-level HTTP server that tells `ProviderProxy._serve` when a connection ends."""

    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Coroutine[Any, Any, web.StreamResponse]],
        ended: dict[object, asyncio.Future[None]],
        **kwargs: Any,
    ) -> None:
        super().__init__(handler, **kwargs)
        self._ended = ended

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        future = self._ended.setdefault(handler, asyncio.get_running_loop().create_future())
        if not future.done():
            future.set_result(None)
