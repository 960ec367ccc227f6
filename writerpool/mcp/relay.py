"""`writerpool serve` while the pool service runs: a relay between the client's stdio and
the service's Unix socket, so every client shares the same writers and sessions.

The relay is a client of its own (`serve-<pid>-<start time>`, a token made at start
and revoked at the end), so its sessions are its own, as with a `serve` that runs
alone; when stdin closes it answers what it was already asked, then closes them, as that
`serve` would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any, NoReturn

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.stdio import checked_stdio_server
from writerpool.state import tokens
from writerpool.state.service_record import ENDPOINT, running

log = logging.getLogger(__name__)

# The socket's requests carry this Host (a loopback name, as the service requires).
SOCKET_URL = f"http://localhost{ENDPOINT}"
# After the client's stdin closes, answers to requests already relayed are still written
# for up to this long (a session start takes seconds; a turn is not awaited by a call).
DRAIN_SECONDS = 120.0
# How often a relay checks that the service it relays to still runs. A service killed
# under it answers nothing more, and the transport does not always say so: the relay
# answers what is in flight with an error and ends, so its client never waits forever.
WATCH_SECONDS = 1.0
# How long closing a relay's own sessions may take when it ends.
CLOSE_SECONDS = 60.0
SERVICE_ENDED = "the pool service ended; start a new session (writerpool serve reconnects)"


@contextlib.asynccontextmanager
async def _service_streams(socket: str, token: str) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    transport = httpx2.AsyncHTTPTransport(uds=socket)
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(transport=transport, headers=headers, timeout=timeout) as http,
        streamable_http_client(SOCKET_URL, http_client=http) as streams,
    ):
        yield streams


class _InFlight:
    """Ids of requests relayed to the service whose answers have not come back yet;
    bounded by what the client asks at once (the service caps its work per client)."""

    def __init__(self) -> None:
        self._ids: set[types.RequestId] = set()
        self._changed = anyio.Event()

    def note(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification):
            # A cancelled request gets no answer (MCP): stop waiting for it.
            ident = (message.params or {}).get("requestId")
            if message.method == "notifications/cancelled" and isinstance(ident, str | int):
                self._ids.discard(ident)
                self._wake()
        elif (
            isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id in self._ids
        ):
            self._ids.discard(message.id)
            self._wake()

    def pending(self) -> list[types.RequestId]:
        return list(self._ids)

    def give_up(self) -> None:
        """The service's stream ended: no answer will come back."""
        self._ids.clear()
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def drained(self) -> None:
        while self._ids:  # each pass waits for one answer to come back
            await self._changed.wait()


async def _pipe(
    source: anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
    sink: anyio.abc.ObjectSendStream[SessionMessage],
    in_flight: _InFlight,
    *,
    answers: bool = False,
) -> None:
    async for message in source:
        if isinstance(message, Exception):
            log.warning("a message was not relayed: %s", type(message).__name__)
            continue
        # A request counts before it goes (its answer may come at once); an answer only
        # once the client's stream took it (a drained relay stops its pipes).
        if not answers:
            in_flight.note(message.message)
        try:
            await sink.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the other side is gone (the watch answers what is in flight)
        if answers:
            in_flight.note(message.message)


async def _answers(
    source: anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
    sink: anyio.abc.ObjectSendStream[SessionMessage],
    in_flight: _InFlight,
) -> None:
    await _pipe(source, sink, in_flight, answers=True)
    in_flight.give_up()


async def _stop_on_signal(paths: Paths, socket: str, token: str, name: str) -> None:
    """SIGTERM or SIGINT: close this relay's sessions, then leave at once (as a lone
    `serve` does: the SDK reads stdin in a worker thread no cancellation interrupts,
    so the relay could not leave its stdio transport while the client keeps stdin)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("signal %d: closing this relay's sessions", signum)
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
                await _close_own_sessions(socket, token)
            _leave(paths, name)


def _leave(paths: Paths, name: str) -> NoReturn:
    with contextlib.suppress(WriterpoolError):
        tokens.revoke(paths, name)
    sys.stderr.flush()
    os._exit(0)


async def _watch_service(
    paths: Paths,
    pid: int,
    sink: anyio.abc.ObjectSendStream[SessionMessage],
    in_flight: _InFlight,
    name: str,
) -> None:
    """Until the service (`pid`) no longer runs; then the relay answers and leaves."""
    while _same_service(paths, pid):  # ends when the service does, or with the relay
        await anyio.sleep(WATCH_SECONDS)
    log.warning("the pool service ended")
    await _answer_and_leave(paths, name, sink, in_flight)


async def _answer_and_leave(
    paths: Paths, name: str, sink: anyio.abc.ObjectSendStream[SessionMessage], in_flight: _InFlight
) -> NoReturn:
    """Each request still in flight gets an error answer; then the relay leaves at once
    (its client sees stdout close)."""
    for ident in in_flight.pending():  # bounded by the requests in flight
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=SERVICE_ENDED)
        await sink.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=ident, error=error)))
    # The writer takes a message only once it wrote the one before: when this one is
    # taken, every answer above is on the wire.
    note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message",
                                     params={"level": "error", "data": SERVICE_ENDED})  # fmt: skip
    await sink.send(SessionMessage(note))
    _leave(paths, name)


async def _close_own_sessions(socket: str, token: str) -> None:
    """What a lone `serve` does when its client leaves: close every session it started."""
    async with _service_streams(socket, token) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        listed = await s.call_tool("pi_session_list", {})
        sessions = (listed.structured_content or {}).get("sessions", [])
        for session in sessions:  # bounded: this relay's own sessions
            if session.get("state") != "closed":
                await s.call_tool("pi_session_close", {"sessionId": session["sessionId"]})


async def relay(paths: Paths, socket: str, pid: int) -> None:
    """Relay stdio to the service (`pid`) until stdin closes, then close this relay's
    sessions; or until the service ends, answering what is in flight with an error.
    The watch and the signals live outside the service's transport: a transport that
    breaks cancels everything inside it."""
    tokens.prune_gone_relays(paths)
    name = tokens.relay_name(os.getpid())
    token = tokens.create(paths, name)
    try:
        async with checked_stdio_server() as (down_read, down_write):
            in_flight = _InFlight()
            async with anyio.create_task_group() as guard:
                guard.start_soon(_stop_on_signal, paths, socket, token, name)
                guard.start_soon(_watch_service, paths, pid, down_write, in_flight, name)
                try:
                    await _relay(socket, token, down_read, down_write, in_flight)
                except Exception:  # the transport to the service broke
                    log.warning("the connection to the pool service broke")
                    await _answer_and_leave(paths, name, down_write, in_flight)
                guard.cancel_scope.cancel()
            # The transport's writer puts out what it was given, then ends: an answer
            # passed on just before is not lost.
            await down_write.aclose()
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
            await _close_own_sessions(socket, token)
    finally:
        with contextlib.suppress(WriterpoolError):
            tokens.revoke(paths, name)


async def _relay(
    socket: str,
    token: str,
    down_read: anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
    down_write: anyio.abc.ObjectSendStream[SessionMessage],
    in_flight: _InFlight,
) -> None:
    """Both ways until the client's stdin closes and what it asked is answered."""
    async with _service_streams(socket, token) as (up_read, up_write):
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_answers, up_read, down_write, in_flight)
                await _pipe(down_read, up_write, in_flight)
                with anyio.move_on_after(DRAIN_SECONDS):
                    await in_flight.drained()
                tg.cancel_scope.cancel()
        finally:
            await up_write.aclose()


def _same_service(paths: Paths, pid: int) -> bool:
    record = running(paths)
    return record is not None and record.get("pid") == pid
