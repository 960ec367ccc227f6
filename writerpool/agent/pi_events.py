"""pi's RPC output, parsed into typed events and folded into the turn model (events.py).

Pure code (no processes, no threads) so recorded pi output can drive it in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from writerpool.agent.events import ERROR_CHARS, TurnLog
from writerpool.report import sanitize
from writerpool.untrusted import DocumentRefused, loads_json
from writerpool.utf8 import valid_text

MAX_DEPTH = 32  # pi's events nest about 6 deep; a hostile line may nest 100,000 deep
# Streamed deltas: by far the most lines, and nothing in them is used. Recognised by
# their first bytes (pi writes `type` first), so they are never parsed.
_UPDATE_PREFIX = b'{"type":"message_update"'


@dataclass(frozen=True)
class PiEvent:
    """One line of pi's stdout, reduced to what the adapter uses."""

    type: str
    response_id: str | None = None
    command: str | None = None
    success: bool | None = None
    role: str | None = None
    stop_reason: str | None = None
    text: str | None = None
    error: str | None = None  # pi's errorMessage of a failed assistant message


UPDATE = PiEvent(type="message_update")


def _text_of(content: object) -> str:
    """The message's text parts, valid text (an agent or its model may write any bytes,
    or lone surrogates in JSON escapes: shown escaped, utf8.py)."""
    if not isinstance(content, list):
        return ""
    parts = [c.get("text") for c in content if isinstance(c, dict) and c.get("type") == "text"]
    return valid_text("".join(p for p in parts if isinstance(p, str)).strip())


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def parse_event(line: bytes | str) -> PiEvent | None:
    """Parse one JSON line; None for anything that is not a pi event object (too deep,
    malformed or not an object). Delta lines are recognised without parsing them. Bytes
    that are not UTF-8 stay in the text they belong to, shown escaped (utf8.py)."""
    if isinstance(line, bytes):
        if line.startswith(_UPDATE_PREFIX):
            return UPDATE
        line = line.decode("utf-8", "surrogateescape")
    try:
        raw: Any = loads_json(line, max_depth=MAX_DEPTH)
    except (ValueError, DocumentRefused):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return None
    kind: str = raw["type"]
    if kind == "response":
        success = raw.get("success")
        return PiEvent(
            type=kind,
            response_id=_opt_str(raw.get("id")),
            command=_opt_str(raw.get("command")),
            success=success if isinstance(success, bool) else None,
        )
    if kind == "message_end" and isinstance(raw.get("message"), dict):
        message = raw["message"]
        role = _opt_str(message.get("role"))
        if role == "assistant":
            error = _opt_str(message.get("errorMessage"))
            return PiEvent(
                type=kind,
                role=role,
                stop_reason=_opt_str(message.get("stopReason")),
                text=_text_of(message.get("content")),
                error=sanitize(error)[:ERROR_CHARS] if error else None,
            )
        return PiEvent(type=kind, role=role)
    return PiEvent(type=kind)


def fold_pi(log: TurnLog, event: PiEvent, now: float) -> None:
    """Fold one pi event into the running turn (events between turns are ignored)."""
    if log.running is None:
        return
    log.progress(now)
    if event.type == "tool_execution_start":
        log.tool_call(now)
    elif event.type == "response" and event.response_id == log.prompt_id:
        if event.success is False:  # pi refused the prompt before running it
            log.refused("the agent refused the prompt", now)
    elif event.type == "message_end" and event.role == "assistant":
        log.answer(event.stop_reason, event.text, event.error is not None, now)
    elif event.type == "agent_end" and log.last_stop != "toolUse":
        log.finish(now)
