"""Codex's `codex exec --json` output, folded into the turn model (events.py). Pure code.

One `codex exec` (or `codex exec resume`) runs one turn: `thread.started` names the
thread the next turn resumes, `item.started` of a `command_execution` is a tool call,
`item.completed` of an `agent_message` is the model's text, `turn.completed` ends the
turn with its usage, `turn.failed` (or an `error` line) fails it.
"""

from __future__ import annotations

from typing import Any

from writerpool.agent.claude_events import parse_line
from writerpool.agent.events import TurnLog, Usage
from writerpool.utf8 import valid_text

__all__ = ["fold_codex", "parse_line", "thread_of"]

TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call"})


def thread_of(event: dict[str, Any]) -> str | None:
    """The thread id a `thread.started` line names (what `resume` takes)."""
    thread = event.get("thread_id")
    return thread if event["type"] == "thread.started" and isinstance(thread, str) else None


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    given, made = raw.get("input_tokens"), raw.get("output_tokens")
    if not isinstance(given, int) or not isinstance(made, int):
        return None
    return Usage(given, made)


def fold_codex(log: TurnLog, event: dict[str, Any], now: float) -> None:
    """Fold one line into the running turn (lines between turns are ignored)."""
    if log.running is None:
        return
    log.progress(now)
    kind = event["type"]
    raw = event.get("item")
    item: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if kind == "item.started" and item.get("type") in TOOL_ITEMS:
        log.tool_call(now)
    elif kind == "item.completed" and item.get("type") == "agent_message":
        text = item.get("text")
        log.answer("stop", valid_text(text.strip()) if isinstance(text, str) else None, False, now)
    elif kind == "turn.completed":
        used = _usage(event.get("usage"))
        if used is not None:
            log.usage(used, now)
        log.finish(now)
    elif kind == "turn.failed":
        log.answer("error", None, True, now)
        log.finish(now)
