"""Turn snapshots as clients see them: status, stop reason, times, the final text by pages."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Protocol

from writerpool.agent.events import cap_text
from writerpool.sessions.contract.arguments import TEXT_PAGE_DEFAULT

# A page's JSON text, escapes included (a control character takes 6 bytes): with the
# rest of a pi_turn_get answer it stays under the answer cap (gitops/limits.py).
PAGE_JSON_BYTES = 160 * 1024

STOP_REASONS = frozenset({"stop", "length", "toolUse", "error", "aborted"})
STATUSES = frozenset({"running", "completed", "failed", "aborted"})


class Snapshot(Protocol):
    """What the agent adapter reports about one turn."""

    @property
    def status(self) -> str: ...
    @property
    def text(self) -> str | None: ...
    @property
    def stop_reason(self) -> str | None: ...
    @property
    def started_at(self) -> object: ...
    @property
    def updated_at(self) -> object: ...
    @property
    def ended_at(self) -> object: ...
    @property
    def text_truncated(self) -> bool: ...
    @property
    def error(self) -> str | None: ...


def now_iso() -> str:
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def _iso(value: object) -> str | None:
    """Times as ISO 8601 UTC strings, whatever the adapter keeps (epoch or datetime)."""
    if value is None:
        return None
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        stamp = value.astimezone(UTC).isoformat(timespec="milliseconds")
        return stamp.replace("+00:00", "Z")
    return str(value)


def page_of(text: str, offset: int, limit: int) -> tuple[str, int | None]:
    """Characters [offset, offset+limit) of text, and where the next page starts; a page
    whose JSON text is over PAGE_JSON_BYTES ends early (nextOffset goes on from there)."""
    page = text[offset : offset + limit]
    while len(json.dumps(page)) > PAGE_JSON_BYTES:
        page = page[: len(page) * 2 // 3]  # at most a few rounds: 6 bytes a character
    end = offset + len(page)
    return page, (end if end < len(text) else None)


def turn_view(
    turn_id: str, snapshot: Snapshot, offset: int = 0, limit: int = TEXT_PAGE_DEFAULT
) -> dict[str, Any]:
    """Only the final assistant text of a completed turn leaves the server; a running,
    failed or aborted turn's partial text could hold tool output or provider errors.
    The text comes one page at a time; `textTruncated` says the agent's answer was longer
    than what is kept (the adapter's flag, or this cap), never that a page ends early."""
    status = snapshot.status if snapshot.status in STATUSES else "failed"
    text: str | None = None
    length: int | None = None
    next_offset: int | None = None
    truncated = False
    if status == "completed" and snapshot.text is not None:
        kept, truncated = cap_text(snapshot.text)
        truncated = truncated or snapshot.text_truncated
        length = len(kept)
        text, next_offset = page_of(kept, offset, limit)
    stop = snapshot.stop_reason if snapshot.stop_reason in STOP_REASONS else None
    return {
        "turnId": turn_id,
        "status": status,
        "stopReason": stop,
        "toolCalls": int(getattr(snapshot, "tool_calls", 0) or 0),
        "text": text,
        "textOffset": offset,
        "textLength": length,
        "nextOffset": next_offset,
        "textTruncated": truncated,
        "error": snapshot.error if status == "failed" else None,
        "startedAt": _iso(snapshot.started_at),
        "updatedAt": _iso(snapshot.updated_at),
        "endedAt": _iso(snapshot.ended_at),
    }


def progress_line(snapshot: Snapshot, now: float) -> str:
    """What a waiting client is told: "turn running: 3 tool calls, 41 s"."""
    started = snapshot.started_at
    seconds = max(0, int(now - started)) if isinstance(started, int | float) else 0
    calls = int(getattr(snapshot, "tool_calls", 0) or 0)
    noun = "tool call" if calls == 1 else "tool calls"
    return f"turn {snapshot.status}: {calls} {noun}, {seconds} s"
