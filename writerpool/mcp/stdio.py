"""The stdio transport: the SDK's, with a reader that answers every malformed line
as JSON-RPC 2.0 asks.

The SDK (mcp 2.3) hands a line that is not a valid JSON-RPC message to the session as
an exception, and the session only logs it: a client that sent a broken request waits
for an answer forever. This reader validates each line first; a valid one goes on to
the SDK unchanged, and an invalid one gets a JSON-RPC error reply:
- a line that is not JSON: -32700 Parse error, with the request's id when one can be
  read before the JSON breaks, else with id null;
- a batch (a JSON array; MCP has none): -32600 Invalid Request for each request in it
  that has an id, or one with id null when none has;
- any other invalid request: -32600 Invalid Request, with its id or null.
Broken responses and broken notifications (a method, no id) are dropped with a log
line: JSON-RPC never answers either.

Like the SDK's own reader, it serves the wire from a private duplicate of fd 0 and
points fd 0 at the null device meanwhile, so no handler or child reads the protocol.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from writerpool.untrusted import DocumentRefused, loads_json
from writerpool.utf8 import valid_text

log = logging.getLogger(__name__)

RequestId = int | str
# The replies one batch line gets at most (the rest of its ids get none).
MAX_BATCH_REPLIES = 64
# In a line that is not JSON, an id before any nested object or array is the request's.
_PREFIX_ID = re.compile(r'"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")')


def request_id(value: object) -> RequestId | None:
    """The id of a request-shaped object (not a response), when it has a valid one."""
    if not isinstance(value, dict) or "result" in value or "error" in value:
        return None
    ident = value.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return None
    return ident


def _id_in_broken_json(line: str) -> RequestId | None:
    head = line.lstrip()
    if not head.startswith("{"):
        return None
    nested = [i for i in (head.find("{", 1), head.find("[", 1)) if i != -1]
    found = _PREFIX_ID.search(head[: min(nested)] if nested else head)
    if found is None:
        return None
    raw = found.group(1)
    if raw.startswith('"'):
        try:
            text = loads_json(raw)
        except ValueError:
            return None
        return text if isinstance(text, str) else None
    return int(raw)


def rejections(line: str) -> list[types.JSONRPCError] | None:
    """None for a valid message; else the error replies the line needs (none for a
    broken response or notification)."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValidationError:
        pass
    try:
        value: Any = loads_json(line)
    except (ValueError, DocumentRefused):
        return [_error(_id_in_broken_json(line), types.PARSE_ERROR, "Parse error")]
    if isinstance(value, list):
        return batch_refusals(value)
    if isinstance(value, dict) and (
        "result" in value or "error" in value or ("method" in value and "id" not in value)
    ):
        return []
    return [_error(request_id(value), types.INVALID_REQUEST, "Invalid Request")]


def batch_refusals(items: list[Any]) -> list[types.JSONRPCError]:
    """A batch's replies: each request in it is refused by its id (the first
    MAX_BATCH_REPLIES; a client waits per id), or the batch once with id null."""
    message = "Invalid Request: batches are not supported"
    ids = [ident for ident in map(request_id, items) if ident is not None]
    if len(ids) > MAX_BATCH_REPLIES:
        log.warning("a batch of %d requests: only the first %d are answered",
                    len(ids), MAX_BATCH_REPLIES)  # fmt: skip
    replies = [_error(ident, types.INVALID_REQUEST, message) for ident in ids[:MAX_BATCH_REPLIES]]
    return replies or [_error(None, types.INVALID_REQUEST, message)]


def _error(ident: RequestId | None, code: int, message: str) -> types.JSONRPCError:
    """The reply, with id null for an id no reply can carry: a JSON string may escape a
    lone surrogate (`"\\ud800"`), which the SDK's writer cannot encode, and its failure
    ended the server."""
    if isinstance(ident, str) and valid_text(ident) != ident:
        ident = None
    return types.JSONRPCError(
        jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
    )


class _CheckedLines:
    """An async line source for the SDK's reader: valid lines pass, invalid ones are
    answered through `replies` and never reach the SDK."""

    def __init__(
        self,
        source: anyio.AsyncFile[str],
        replies: anyio.abc.ObjectSendStream[types.JSONRPCError],
    ) -> None:
        self._source = source
        self._replies = replies

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async with self._replies:
            async for line in self._source:
                if not line.strip():
                    continue
                answers = rejections(line)
                if answers is None:
                    yield line
                elif not answers:
                    log.warning("dropped a malformed response or notification")
                for answer in answers or ():
                    await self._replies.send(answer)


@contextlib.contextmanager
def _claimed_stdin() -> Any:
    """fd 0's wire as a private text stream; fd 0 itself reads the null device."""
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    wire = TextIOWrapper(
        os.fdopen(private, "rb", closefd=False), encoding="utf-8", errors="replace"
    )
    try:
        yield wire
    finally:
        with contextlib.suppress(ValueError):
            wire.detach()
        os.dup2(private, 0)
        os.close(private)


@contextlib.asynccontextmanager
async def checked_stdio_server() -> AsyncIterator[
    tuple[
        anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
        anyio.abc.ObjectSendStream[SessionMessage],
    ]
]:
    """stdio_server() whose reader answers malformed requests (see the module doc)."""
    send, receive = anyio.create_memory_object_stream[types.JSONRPCError](16)
    with _claimed_stdin() as wire:
        lines = _CheckedLines(anyio.wrap_file(wire), send)
        async with (
            stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream),
            anyio.create_task_group() as tg,
        ):

            async def forward() -> None:
                async with receive:
                    async for reply in receive:
                        await write_stream.send(SessionMessage(reply))

            tg.start_soon(forward)
            yield read_stream, write_stream
            tg.cancel_scope.cancel()
