"""Claude Code's stream-json lines folded into the turn model."""

from __future__ import annotations

import json
from collections.abc import Mapping

from writerpool.agent.claude_events import fold_claude, interrupting, parse_line
from writerpool.agent.events import ANSWER_ERROR, TurnLog, Usage

TOOL = {"type": "assistant", "message": {"stop_reason": "tool_use", "content": [
    {"type": "text", "text": "Running it."},
    {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "true"}}]}}  # fmt: skip
DONE = {"type": "assistant", "message": {"stop_reason": "end_turn",
        "content": [{"type": "text", "text": "Committed."}]}}  # fmt: skip
RESULT = {"type": "result", "subtype": "success", "is_error": False, "result": "Committed.",
          "usage": {"input_tokens": 120, "output_tokens": 30}}  # fmt: skip


def _replay(*events: Mapping[str, object]) -> TurnLog:
    log = TurnLog()
    log.begin("t-1", "prompt-t-1", 0.0)
    for i, event in enumerate(events):
        parsed = parse_line(json.dumps(event).encode())
        assert parsed is not None
        fold_claude(log, parsed, float(i + 1))
    return log


def test_a_run_with_a_tool_completes_with_the_result_text_and_usage() -> None:
    log = _replay({"type": "system", "subtype": "init"}, TOOL, {"type": "user"}, DONE)
    assert log.get("t-1").status == "running"  # the run ends only with its result
    snap = _replay(TOOL, DONE, RESULT).get("t-1")
    assert snap.status == "completed" and snap.text == "Committed."
    assert snap.tool_calls == 1 and snap.stop_reason == "stop"
    assert snap.usage == Usage(120, 30)


def test_an_error_result_fails_the_turn_without_the_providers_words() -> None:
    error = {"type": "result", "subtype": "error_during_execution", "is_error": True,
             "result": "API Error: 401 secret-ish detail"}  # fmt: skip
    snap = _replay(TOOL, error).get("t-1")
    assert snap.status == "failed" and snap.error == ANSWER_ERROR


INTERRUPTED = {"type": "result", "subtype": "error_during_execution", "is_error": True}


def test_an_interrupted_run_ends_aborted_and_a_run_done_before_the_interrupt_stands() -> None:
    log = _replay(TOOL)
    interrupting(log, 2.0)
    for event in (DONE, INTERRUPTED):  # a message of the interrupted run, then its end
        fold_claude(log, event, 3.0)
    snap = log.get("t-1")
    assert (snap.status, snap.stop_reason, snap.text, snap.error) == ("aborted", "aborted",
                                                                     None, None)  # fmt: skip
    late = _replay(TOOL)
    interrupting(late, 2.0)
    fold_claude(late, RESULT, 3.0)
    assert (late.get("t-1").status, late.get("t-1").text) == ("completed", "Committed.")
    idle = TurnLog()
    interrupting(idle, 1.0)  # between turns: nothing to interrupt
    assert idle.running is None and idle.all() == []


def test_lines_that_are_not_events_are_ignored() -> None:
    assert parse_line(b"not json") is None
    assert parse_line(b'{"no": "type"}') is None
    assert parse_line(b"[" * 100 + b"]" * 100) is None
