"""Turn snapshots as clients see them: status, stop reason, times, capped final text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

TEXT_CAP_BYTES = 64 * 1024
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


def cap_text(text: str, limit: int = TEXT_CAP_BYTES) -> tuple[str, bool]:
    """At most `limit` UTF-8 bytes, cut at a character boundary; (text, truncated)."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode("utf-8", errors="ignore"), True


def turn_view(turn_id: str, snapshot: Snapshot) -> dict[str, Any]:
    """Only the final assistant text of a completed turn leaves the server; a running,
    failed or aborted turn's partial text could hold tool output or provider errors."""
    status = snapshot.status if snapshot.status in STATUSES else "failed"
    text: str | None = None
    truncated = False
    if status == "completed" and snapshot.text is not None:
        text, cut = cap_text(snapshot.text)
        # The adapter caps the text first; its flag says whether that cut anything.
        truncated = cut or snapshot.text_truncated
    stop = snapshot.stop_reason if snapshot.stop_reason in STOP_REASONS else None
    return {
        "turnId": turn_id,
        "status": status,
        "stopReason": stop,
        "text": text,
        "textTruncated": truncated,
        "error": snapshot.error if status == "failed" else None,
        "startedAt": _iso(snapshot.started_at),
        "updatedAt": _iso(snapshot.updated_at),
        "endedAt": _iso(snapshot.ended_at),
    }
