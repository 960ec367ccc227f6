"""pi's RPC output, parsed: typed events and the turn bookkeeping built from them.

Pure code (no processes, no threads) so recorded pi output can drive it in tests.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Literal

from writerpool.errors import WriterpoolError
from writerpool.report import sanitize
from writerpool.untrusted import DocumentRefused, loads_json
from writerpool.utf8 import valid_text

TurnStatus = Literal["running", "completed", "failed", "aborted"]
TEXT_CAP = 64 * 1024
MAX_TURNS = 20
MAX_DEPTH = 32  # pi's events nest about 6 deep; a hostile line may nest 100,000 deep
ERROR_CHARS = 300
EXITED_ERROR = "the agent exited during the turn; the server log has its last stderr lines"
ANSWER_ERROR = "the model's answer ended in an error; the server log has the provider's message"
# Streamed deltas: by far the most lines, and nothing in them is used. Recognised by
# their first bytes (pi writes `type` first), so they are never parsed.
_UPDATE_PREFIX = b'{"type":"message_update"'

# pi's final assistant stopReason -> how the turn ended. "toolUse" is missing on
# purpose: pi runs the tools and asks the model again, so the turn goes on.
STOP_STATUS: dict[str, TurnStatus] = {
    "stop": "completed",
    "length": "completed",
    "error": "failed",
    "aborted": "aborted",
}


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


def cap_text(text: str, limit: int = TEXT_CAP) -> tuple[str, bool]:
    """At most `limit` bytes of UTF-8, cut on a character boundary; (text, truncated).
    A lone surrogate (no UTF-8 at all) is shown escaped first (utf8.py)."""
    text = valid_text(text)
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode(errors="ignore"), True


@dataclass(frozen=True)
class TurnSnapshot:
    turn_id: str
    status: TurnStatus
    text: str | None
    stop_reason: str | None
    started_at: float
    updated_at: float
    ended_at: float | None
    tool_calls: int = 0  # tools pi started in this turn (for progress reports)
    text_truncated: bool = False  # the text was cut to TEXT_CAP (decided before cutting)
    # Why a failed turn failed, in writerpool's words: clients see it, so it never
    # carries pi's or the provider's text (pi.py logs those for the operator).
    error: str | None = None


@dataclass
class _Turn:
    snapshot: TurnSnapshot
    prompt_id: str
    last_stop: str | None = None
    last_text: str | None = None
    last_error: str | None = None


class TurnLog:
    """The turns of one pi process: at most one running, the last MAX_TURNS kept."""

    def __init__(self, max_turns: int = MAX_TURNS) -> None:
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self._max = max_turns
        self._running: str | None = None

    @property
    def running(self) -> str | None:
        return self._running

    def begin(self, turn_id: str, prompt_id: str, now: float) -> TurnSnapshot:
        if self._running is not None:
            raise WriterpoolError("session_busy", "a turn is already running in this session")
        snap = TurnSnapshot(turn_id, "running", None, None, now, now, None)
        self._turns[turn_id] = _Turn(snap, prompt_id)
        self._running = turn_id
        while len(self._turns) > self._max:
            self._turns.popitem(last=False)
        return snap

    def get(self, turn_id: str) -> TurnSnapshot:
        turn = self._turns.get(turn_id)
        if turn is None:
            raise WriterpoolError("turn_unknown", "no such turn in this session")
        return turn.snapshot

    def all(self) -> list[TurnSnapshot]:
        return [t.snapshot for t in self._turns.values()]

    def apply(self, event: PiEvent, now: float) -> None:
        """Fold one event into the running turn (events between turns are ignored)."""
        turn = self._turns.get(self._running) if self._running else None
        if turn is None:
            return
        turn.snapshot = replace(turn.snapshot, updated_at=now)
        if event.type == "tool_execution_start":
            turn.snapshot = replace(turn.snapshot, tool_calls=turn.snapshot.tool_calls + 1)
        elif event.type == "response" and event.response_id == turn.prompt_id:
            if event.success is False:  # pi refused the prompt before running it
                turn.last_error = "the agent refused the prompt"
                self._end(turn, "failed", "error", now)
        elif event.type == "message_end" and event.role == "assistant":
            turn.last_stop, turn.last_text = event.stop_reason, event.text
            if event.error is not None:
                turn.last_error = ANSWER_ERROR
        elif event.type == "agent_end" and turn.last_stop != "toolUse":
            # No assistant message at all means the run broke before the model answered.
            status = STOP_STATUS.get(turn.last_stop or "error", "failed")
            self._end(turn, status, turn.last_stop, now)

    def process_ended(self, now: float, closing: bool) -> None:
        """The process is gone: a running turn ends (aborted when we closed it)."""
        turn = self._turns.get(self._running) if self._running else None
        if turn is not None:
            if not closing:
                turn.last_error = EXITED_ERROR
            self._end(turn, "aborted" if closing else "failed", turn.last_stop, now)

    def _end(self, turn: _Turn, status: TurnStatus, stop: str | None, now: float) -> None:
        text, truncated = cap_text(turn.last_text) if turn.last_text is not None else (None, False)
        error = turn.last_error if status == "failed" else None
        if status == "failed" and error is None:
            error = ANSWER_ERROR if stop == "error" else "the turn failed"
        turn.snapshot = replace(
            turn.snapshot, status=status, text=text, stop_reason=stop, updated_at=now,
            ended_at=now, text_truncated=truncated, error=error,
        )  # fmt: skip
        self._running = None
