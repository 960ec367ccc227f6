"""Claude Code's stream-json output (`claude -p --output-format stream-json`), folded
into the turn model (events.py). Pure code, so recorded output can drive it in tests.

An `assistant` line is one model message (its text and tool_use blocks); a `result`
line ends the run for one prompt, with the final text and the run's usage. Claude Code
ends an interrupted run with an error result: once writerpool has asked for the
interrupt (`interrupting`), that result ends the turn `aborted`, not failed.
"""

from __future__ import annotations

from typing import Any

from writerpool.agent.events import TurnLog, Usage
from writerpool.untrusted import DocumentRefused, loads_json
from writerpool.utf8 import valid_text

MAX_DEPTH = 32
ABORTED = "aborted"  # the turn model's stop reason of an aborted turn
# Claude's stop_reason -> the turn model's words.
STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
        "tool_use": "toolUse", "refusal": "stop"}  # fmt: skip


def parse_line(line: bytes) -> dict[str, Any] | None:
    try:
        raw = loads_json(line.decode("utf-8", "surrogateescape"), max_depth=MAX_DEPTH)
    except (ValueError, DocumentRefused):
        return None
    return raw if isinstance(raw, dict) and isinstance(raw.get("type"), str) else None


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    counts = [raw.get(k) for k in ("input_tokens", "output_tokens")]
    if not all(isinstance(c, int) for c in counts):
        return None
    return Usage(int(counts[0] or 0), int(counts[1] or 0))


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def interrupting(log: TurnLog, now: float) -> None:
    """writerpool asked Claude Code to interrupt the running turn (a no-op between turns)."""
    log.answer(ABORTED, None, False, now)


def fold_claude(log: TurnLog, event: dict[str, Any], now: float) -> None:
    """Fold one stream-json line into the running turn (lines between turns are ignored)."""
    if log.running is None:
        return
    log.progress(now)
    kind = event["type"]
    message = event.get("message")
    interrupted = log.last_stop == ABORTED
    if kind == "assistant" and isinstance(message, dict) and not interrupted:
        blocks = _blocks(message)
        for _ in (b for b in blocks if b.get("type") == "tool_use"):
            log.tool_call(now)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        stop = message.get("stop_reason")
        tools = any(b.get("type") == "tool_use" for b in blocks)
        word = "toolUse" if tools else STOP.get(stop, "stop") if isinstance(stop, str) else None
        log.answer(word, valid_text(text.strip()) or None, False, now)
    elif kind == "result":
        used = _usage(event.get("usage"))
        if used is not None:
            log.usage(used, now)
        result = event.get("result")
        failed = bool(event.get("is_error")) or event.get("subtype") != "success"
        if not (failed and interrupted):  # a run that ended before the interrupt stands
            final = valid_text(result.strip()) if isinstance(result, str) else None
            log.answer("error" if failed else "stop", final, failed, now)
        log.finish(now)
