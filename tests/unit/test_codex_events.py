"""Codex's exec --json lines folded into the turn model."""

from __future__ import annotations

import json
from collections.abc import Mapping

from writerpool.agent.codex_events import fold_codex, parse_line, thread_of
from writerpool.agent.events import ANSWER_ERROR, TurnLog, Usage

START = {"type": "thread.started", "thread_id": "th-1"}
COMMAND = {"type": "item.started", "item": {"id": "i1", "type": "command_execution",
           "command": "/bin/sh -lc 'true'"}}  # fmt: skip
MESSAGE = {"type": "item.completed", "item": {"id": "i2", "type": "agent_message",
           "text": "Committed."}}  # fmt: skip
DONE = {"type": "turn.completed", "usage": {"input_tokens": 40, "output_tokens": 9}}


def _replay(*events: Mapping[str, object]) -> TurnLog:
    log = TurnLog()
    log.begin("t-1", "prompt-t-1", 0.0)
    for i, event in enumerate(events):
        parsed = parse_line(json.dumps(event).encode())
        assert parsed is not None
        fold_codex(log, parsed, float(i + 1))
    return log


def test_a_turn_with_a_command_completes_with_the_message_and_usage() -> None:
    assert _replay(START, COMMAND, MESSAGE).get("t-1").status == "running"
    snap = _replay(START, {"type": "turn.started"}, COMMAND, MESSAGE, DONE).get("t-1")
    assert snap.status == "completed" and snap.text == "Committed."
    assert snap.tool_calls == 1 and snap.usage == Usage(40, 9)


def test_a_failed_turn_fails_in_writerpools_words() -> None:
    failed = {"type": "turn.failed", "error": {"message": "401 from the provider"}}
    snap = _replay(START, failed).get("t-1")
    assert snap.status == "failed" and snap.error == ANSWER_ERROR


def test_the_thread_id_comes_from_thread_started_only() -> None:
    assert thread_of(dict(START)) == "th-1"
    assert thread_of({"type": "turn.started", "thread_id": "x"}) is None
