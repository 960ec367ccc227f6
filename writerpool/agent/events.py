"""The turn model every agent's events fold into: turns with their text, tool calls,
stop reason, error and usage, and the bookkeeping of one agent process's turns.

Pure code (no processes, no threads): each backend parses its own output (pi_events.py,
claude_events.py, codex_events.py) and folds it in through TurnLog's operations, so
recorded output can drive it in tests.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Literal

from writerpool.errors import WriterpoolError
from writerpool.utf8 import valid_text

TurnStatus = Literal["running", "completed", "failed", "aborted"]
TEXT_CAP = 64 * 1024
MAX_TURNS = 20
ERROR_CHARS = 300
EXITED_ERROR = "the agent exited during the turn; the server log has its last stderr lines"
ANSWER_ERROR = "the model's answer ended in an error; the server log has the provider's message"

# The turn model's stop reasons (pi's words, which every backend maps to) -> how the
# turn ended. "toolUse" is missing on purpose: the agent runs the tools and asks the
# model again, so the turn goes on.
STOP_STATUS: dict[str, TurnStatus] = {
    "stop": "completed",
    "length": "completed",
    "error": "failed",
    "aborted": "aborted",
}


def cap_text(text: str, limit: int = TEXT_CAP) -> tuple[str, bool]:
    """At most `limit` bytes of UTF-8, cut on a character boundary; (text, truncated).
    A lone surrogate (no UTF-8 at all) is shown escaped first (utf8.py)."""
    text = valid_text(text)
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode(errors="ignore"), True


@dataclass(frozen=True)
class Usage:
    """Tokens the agent reports for a turn (summed over its model calls)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True)
class TurnSnapshot:
    turn_id: str
    status: TurnStatus
    text: str | None
    stop_reason: str | None
    started_at: float
    updated_at: float
    ended_at: float | None
    tool_calls: int = 0  # tools the agent started in this turn (for progress reports)
    text_truncated: bool = False  # the text was cut to TEXT_CAP (decided before cutting)
    # Why a failed turn failed, in writerpool's words: clients see it, so it never
    # carries the agent's or the provider's text (the adapters log those for the operator).
    error: str | None = None
    usage: Usage | None = None  # when the agent reports it


@dataclass
class _Turn:
    snapshot: TurnSnapshot
    prompt_id: str
    last_stop: str | None = None
    last_text: str | None = None
    last_error: str | None = None


class TurnLog:
    """The turns of one agent process: at most one running, the last MAX_TURNS kept."""

    def __init__(self, max_turns: int = MAX_TURNS) -> None:
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self._max = max_turns
        self._running: str | None = None

    @property
    def running(self) -> str | None:
        return self._running

    @property
    def prompt_id(self) -> str | None:
        """The running turn's prompt id (what the agent echoes when it answers the prompt)."""
        turn = self._current()
        return turn.prompt_id if turn is not None else None

    @property
    def last_stop(self) -> str | None:
        """The running turn's last model answer's stop reason."""
        turn = self._current()
        return turn.last_stop if turn is not None else None

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

    # -- what an agent's events say (each a no-op between turns) ------------------

    def progress(self, now: float) -> None:
        """Something happened in the running turn."""
        turn = self._current()
        if turn is not None:
            turn.snapshot = replace(turn.snapshot, updated_at=now)

    def tool_call(self, now: float) -> None:
        turn = self._current()
        if turn is not None:
            snap = turn.snapshot
            turn.snapshot = replace(snap, tool_calls=snap.tool_calls + 1, updated_at=now)

    def usage(self, used: Usage, now: float) -> None:
        turn = self._current()
        if turn is not None:
            total = used if turn.snapshot.usage is None else turn.snapshot.usage + used
            turn.snapshot = replace(turn.snapshot, usage=total, updated_at=now)

    def answer(self, stop: str | None, text: str | None, failed: bool, now: float) -> None:
        """The model answered: its stop reason (the turn model's words) and final text;
        `failed`: the answer ended in an error (its words are for the operator only)."""
        turn = self._current()
        if turn is None:
            return
        turn.last_stop, turn.last_text = stop, text
        if failed:
            turn.last_error = ANSWER_ERROR
        turn.snapshot = replace(turn.snapshot, updated_at=now)

    def finish(self, now: float) -> None:
        """The agent's run for the prompt ended: the status follows the last answer's stop
        (no answer at all means the run broke before the model answered)."""
        turn = self._current()
        if turn is not None:
            status = STOP_STATUS.get(turn.last_stop or "error", "failed")
            self._end(turn, status, turn.last_stop, now)

    def refused(self, why: str, now: float) -> None:
        """The agent refused the prompt, or its run broke off: the turn fails with `why`
        (writerpool's words)."""
        turn = self._current()
        if turn is not None:
            turn.last_error = why
            self._end(turn, "failed", "error", now)

    def process_ended(self, now: float, closing: bool) -> None:
        """The process is gone: a running turn ends (aborted when we closed it)."""
        turn = self._current()
        if turn is not None:
            if not closing:
                turn.last_error = EXITED_ERROR
            self._end(turn, "aborted" if closing else "failed", turn.last_stop, now)

    def _current(self) -> _Turn | None:
        return self._turns.get(self._running) if self._running else None

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
