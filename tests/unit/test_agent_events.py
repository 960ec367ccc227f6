"""Turn bookkeeping fed with pi 0.73.1's recorded RPC output (tests/unit/data/pi/)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from writerpool.agent.events import (
    ANSWER_ERROR,
    EXITED_ERROR,
    MAX_TURNS,
    TEXT_CAP,
    TurnLog,
    cap_text,
)
from writerpool.agent.pi_events import PiEvent, fold_pi, parse_event
from writerpool.agent.process import read_line as _read_line
from writerpool.errors import WriterpoolError

DATA = Path(__file__).parent / "data" / "pi"
# The recordings' prompt command carried this id (as PiAgent sends "prompt-<turn id>").
PROMPT_ID = "prompt-t-1"


def replay(name: str, log: TurnLog | None = None) -> TurnLog:
    log = log or TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    for i, line in enumerate((DATA / f"{name}.jsonl").read_bytes().split(b"\n")):
        event = parse_event(line) if line else None
        if event is not None:
            fold_pi(log, event, now=float(i + 1))
    return log


def test_recorded_text_answer_completes_with_the_final_text() -> None:
    snap = replay("text").get("t-1")
    assert snap.status == "completed"
    assert snap.stop_reason == "stop"
    assert snap.text == "Hello from the script."
    assert snap.ended_at is not None and snap.updated_at == snap.ended_at


def test_tool_use_in_the_middle_does_not_end_the_turn() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    lines = (DATA / "bash_tool.jsonl").read_bytes().splitlines()
    ended_at_line = None
    for i, line in enumerate(lines):
        event = parse_event(line)
        assert event is not None
        fold_pi(log, event, now=float(i + 1))
        if ended_at_line is None and log.get("t-1").status != "running":
            ended_at_line = i
    snap = log.get("t-1")
    assert snap.status == "completed" and snap.text == "I made the file."
    # It ended on the last agent_end, after the tool ran and the model answered again.
    assert ended_at_line is not None
    assert json.loads(lines[ended_at_line])["type"] == "agent_end"
    assert b'"toolName":"bash"' in b"".join(lines[:ended_at_line])


def test_refused_tool_call_still_completes_with_the_following_answer() -> None:
    snap = replay("readonly_write").get("t-1")
    assert snap.status == "completed" and snap.text == "tried to write"


def test_recorded_abort_is_aborted_and_keeps_partial_text() -> None:
    snap = replay("abort").get("t-1")
    assert snap.status == "aborted" and snap.stop_reason == "aborted"
    assert snap.text is not None and "This is a long slow answer".startswith(snap.text)


def test_provider_error_fails_without_the_error_message() -> None:
    snap = replay("provider_error").get("t-1")
    assert snap.status == "failed" and snap.stop_reason == "error"
    assert snap.text == ""
    raw = (DATA / "provider_error.jsonl").read_text()
    assert "Connection error" in raw  # the recording has it; the snapshot must not


def test_every_event_bumps_liveness_while_running() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    fold_pi(log, PiEvent(type="message_update"), now=5.0)
    assert log.get("t-1").updated_at == 5.0 and log.get("t-1").status == "running"


def test_refused_prompt_fails_the_turn() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    refusal = (
        b'{"id":"prompt-t-1","type":"response","command":"prompt","success":false,"error":"x"}'
    )
    event = parse_event(refusal)
    assert event == PiEvent("response", response_id=PROMPT_ID, command="prompt", success=False)
    fold_pi(log, event, now=1.0)
    assert log.get("t-1").status == "failed" and log.running is None


def test_agent_end_without_an_assistant_message_fails() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    fold_pi(log, PiEvent(type="agent_end"), now=1.0)
    assert log.get("t-1").status == "failed"


def test_process_end_fails_a_running_turn_or_aborts_it_when_closing() -> None:
    died = TurnLog()
    died.begin("t-1", PROMPT_ID, now=0.0)
    died.process_ended(now=2.0, closing=False)
    assert died.get("t-1").status == "failed" and died.get("t-1").ended_at == 2.0
    closed = TurnLog()
    closed.begin("t-1", PROMPT_ID, now=0.0)
    closed.process_ended(now=2.0, closing=True)
    assert closed.get("t-1").status == "aborted"


def test_one_turn_at_a_time_and_unknown_turns() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    with pytest.raises(WriterpoolError) as busy:
        log.begin("t-2", "prompt-t-2", now=1.0)
    assert busy.value.code == "session_busy"
    with pytest.raises(WriterpoolError) as unknown:
        log.get("t-9")
    assert unknown.value.code == "turn_unknown"


def test_events_outside_a_turn_change_nothing() -> None:
    log = replay("text")
    before = log.get("t-1")
    for line in (DATA / "abort.jsonl").read_bytes().splitlines():
        event = parse_event(line)
        assert event is not None
        fold_pi(log, event, now=99.0)
    assert log.get("t-1") == before


def test_only_the_last_twenty_turns_are_kept() -> None:
    log = TurnLog()
    for i in range(MAX_TURNS + 5):
        log.begin(f"t-{i}", f"prompt-t-{i}", now=float(i))
        log.process_ended(now=float(i), closing=True)
    kept = [s.turn_id for s in log.all()]
    assert kept == [f"t-{i}" for i in range(5, MAX_TURNS + 5)]
    with pytest.raises(WriterpoolError):
        log.get("t-0")


def test_final_text_is_capped_at_64_kib_on_a_character_boundary() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    long_text = "é" * TEXT_CAP  # two bytes each
    fold_pi(log, PiEvent("message_end", role="assistant", stop_reason="stop", text=long_text), 1.0)
    fold_pi(log, PiEvent("agent_end"), 2.0)
    text = log.get("t-1").text
    assert text is not None and len(text.encode()) <= TEXT_CAP and set(text) == {"é"}
    assert log.get("t-1").text_truncated  # decided before the cut, so it can be true
    assert cap_text("short") == ("short", False)


def test_an_answer_of_exactly_the_cap_is_not_truncated() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    fold_pi(
        log, PiEvent("message_end", role="assistant", stop_reason="stop", text="a" * TEXT_CAP), 1
    )
    fold_pi(log, PiEvent("agent_end"), 2.0)
    assert not log.get("t-1").text_truncated and log.get("t-1").text == "a" * TEXT_CAP


def test_a_line_nested_100000_deep_is_ignored_not_fatal() -> None:
    assert parse_event(b"[" * 100_000) is None
    assert parse_event(b'{"type": "x", "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}") is None
    deep = {
        "type": "agent_end",
        "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    }
    assert parse_event(json.dumps(deep).encode()) is None
    assert parse_event(b'{"type":"message_update","assistantMessageEvent":{}}') is not None


def test_a_failed_turn_says_why() -> None:
    log = TurnLog()
    log.begin("t-1", PROMPT_ID, now=0.0)
    line = json.dumps({"type": "message_end", "message": {"role": "assistant",
                       "stopReason": "error", "content": [],
                       "errorMessage": "Connection error at /home/op/x token=abc123"}})  # fmt: skip
    event = parse_event(line.encode())
    assert event is not None
    fold_pi(log, event, 1.0)
    fold_pi(log, PiEvent("agent_end"), 2.0)
    turn = log.get("t-1")
    assert turn.status == "failed" and turn.error == ANSWER_ERROR
    # The provider's words are kept for the operator's log only, path- and secret-free.
    assert event.error is not None and event.error.startswith("Connection error at <path>")
    assert "abc123" not in event.error
    log.begin("t-2", PROMPT_ID + "2", now=3.0)
    log.process_ended(4.0, closing=False)
    assert log.get("t-2").error == EXITED_ERROR
    log.begin("t-3", PROMPT_ID + "3", now=5.0)
    log.process_ended(6.0, closing=True)
    assert log.get("t-3").status == "aborted" and log.get("t-3").error is None


def test_parse_ignores_noise_and_joins_text_blocks() -> None:
    assert parse_event(b"not json") is None
    assert parse_event(b"[1, 2]") is None
    assert parse_event(b'{"no_type": 1}') is None
    line = json.dumps({"type": "message_end", "message": {"role": "assistant", "stopReason": "stop",
                       "content": [{"type": "thinking", "thinking": "hmm"},
                                   {"type": "text", "text": "a"},
                                   {"type": "toolCall", "name": "bash"},
                                   {"type": "text", "text": "b "}]}})  # fmt: skip
    assert parse_event(line) == PiEvent(
        "message_end", role="assistant", stop_reason="stop", text="ab"
    )
    user = parse_event(b'{"type":"message_end","message":{"role":"user","content":"hi"}}')
    assert user == PiEvent("message_end", role="user")


def test_lines_split_on_newline_only() -> None:
    # U+2028 and U+2029 may appear raw inside pi's JSON strings; they are not line ends.
    first = json.dumps({"type": "x", "text": "a\u2028b\u2029c"}, ensure_ascii=False).encode()
    stream = io.BytesIO(first + b"\n" + b'{"type":"y"}\n' + b'{"type":"z"')
    assert _read_line(stream) == first + b"\n"
    assert parse_event(first) == PiEvent("x")
    assert _read_line(stream) == b'{"type":"y"}\n'
    assert _read_line(stream) == b'{"type":"z"'
    assert _read_line(stream) == b""
