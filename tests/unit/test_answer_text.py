"""Every answer is valid UTF-8, whatever bytes a clone's names or an agent's text hold:
where bytes become text, and in the last guard every answer goes through."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from writerpool.agent.events import TurnLog, cap_text
from writerpool.agent.pi_events import fold_pi, parse_event
from writerpool.errors import WriterpoolError
from writerpool.mcp.server import to_result
from writerpool.pool.collect.review import terminal_safe
from writerpool.pool.writer.inspect import parse_report
from writerpool.report import sanitize
from writerpool.sessions.contract.answers import sendable
from writerpool.sessions.work import CloneRefs, clone_work
from writerpool.utf8 import decoded, valid_json, valid_text

COMMIT = "a" * 40
OTHER = "b" * 40
# A branch named with the bytes ff fe, as clonetool reports it (surrogateescape).
HOSTILE = b"\xff\xfe".decode("utf-8", "surrogateescape")


def _sent(body: dict[str, Any]) -> str:
    """The answer as a transport sends it (what failed before: 'surrogates not allowed')."""
    return to_result("pi_session_get", body).model_dump_json(by_alias=True, exclude_unset=True)


def test_undecodable_bytes_show_as_x_escapes_and_other_lone_surrogates_as_u_escapes() -> None:
    assert valid_text(HOSTILE + "-tag") == "\\xff\\xfe-tag"
    assert valid_text("lone \ud800 high, lone \udfff low") == "lone \\ud800 high, lone \\udfff low"
    assert decoded(b"caf\xc3\xa9 \xff") == "caf\u00e9 \\xff"
    text = "plain, caf\u00e9, \U0001f600, \ufffd"
    assert valid_text(text) is text  # valid text is kept, not copied


def test_the_guard_makes_every_string_and_key_of_an_answer_valid() -> None:
    body = {"ok": True, "work": {"branchesChanged": [{"name": HOSTILE, "commit": COMMIT}],
                                 HOSTILE: ["\ud800", ("x\udcff",)]}}  # fmt: skip
    with pytest.raises(UnicodeEncodeError):
        json.dumps(body, ensure_ascii=False).encode()
    sent = sendable("pi_session_get", body)
    assert sent["work"]["branchesChanged"][0]["name"] == "\\xff\\xfe"
    assert sent["work"]["\\xff\\xfe"] == ["\\ud800", ["x\\xff"]]
    wire = json.loads(_sent(sent))
    assert wire["structuredContent"] == sent
    assert json.loads(wire["content"][0]["text"]) == sent


@pytest.mark.parametrize("value", [math.nan, {1, 2}, b"bytes", object()])
def test_an_answer_that_is_no_json_fails_its_call_with_a_code(value: object) -> None:
    sent = sendable("pi_session_get", {"ok": True, "value": value})
    assert sent["ok"] is False
    assert sent["error"]["code"] == "answer_unencodable"
    json.loads(_sent(sent))


def test_an_answer_nested_past_the_interpreters_depth_fails_its_call_with_a_code() -> None:
    deep: object = "leaf"
    for _ in range(5000):
        deep = [deep]
    sent = sendable("pi_session_get", {"ok": True, "value": deep})
    assert sent["ok"] is False and sent["error"]["code"] == "answer_unencodable"


def test_the_transport_guard_fails_the_call_not_the_transport() -> None:
    """A body that skipped the guard still never reaches the transport unencodable."""
    result = to_result("pi_session_get", {"ok": True, "name": HOSTILE})
    assert result.is_error
    assert result.structured_content == {
        "ok": False,
        "error": {"code": "answer_unencodable", "message": "the answer could not be encoded"},
    }


def test_error_details_and_terminal_text_are_valid() -> None:
    assert sanitize(f"in the clone: branch {HOSTILE}") == "in the clone: branch \\xff\\xfe"
    assert terminal_safe(f"subject {HOSTILE}\x1b[31m") == "subject \\xff\\xfe"


def test_the_agent_s_text_is_valid_whatever_its_line_held() -> None:
    """Bytes that are not UTF-8 inside a line, and lone surrogates escaped in its JSON."""
    content = [{"type": "text", "text": "X"}]
    line = json.dumps({"type": "message_end", "message": {
        "role": "assistant", "stopReason": "stop", "content": content}}).encode()  # fmt: skip
    raw = line.replace(b'"X"', b'"bytes \xff\xfe, lone \\ud800"')
    event = parse_event(raw)
    assert event is not None and event.text == "bytes \\xff\\xfe, lone \\ud800"
    log = TurnLog()
    log.begin("t-1", "prompt-t-1", now=0.0)
    fold_pi(log, event, now=1.0)
    fold_pi(log, parse_event(b'{"type":"agent_end"}') or event, now=2.0)
    snap = log.get("t-1")
    assert (snap.status, snap.text) == ("completed", "bytes \\xff\\xfe, lone \\ud800")
    assert cap_text("a\udcffb") == ("a\\xffb", False)


def _report(**extra: Any) -> dict[str, Any]:
    return {"head": "refs/heads/main", "head_commit": COMMIT, "stash": False, "tags": 0,
            "dirty": False, "branches": [{"name": "main", "commit": COMMIT}], **extra}  # fmt: skip


def test_names_and_paths_that_are_not_utf8_do_not_fail_the_inspection() -> None:
    """The inspection keeps them as their bytes (collection and digests need them)."""
    seen = parse_report(_report(
        head=f"refs/heads/{HOSTILE}",
        branches=[{"name": HOSTILE, "commit": OTHER}, {"name": "main", "commit": COMMIT}],
        tag_refs={f"{HOSTILE}-tag": OTHER},
        extra_refs=[{"name": f"refs/tags/{HOSTILE}-tag", "new": True}],
        entries=[{"kind": "ignored", "path": f"build/{HOSTILE}"}],
    ))  # fmt: skip
    assert seen.branches[HOSTILE] == OTHER
    assert seen.new_extra_refs == (f"refs/tags/{HOSTILE}-tag",)
    with pytest.raises(WriterpoolError, match="inspection report is invalid"):
        parse_report(_report(extra_refs=[{"name": "x" * 8193, "new": True}]))


def test_a_session_s_work_names_hostile_branches_visibly() -> None:
    start = CloneRefs("refs/heads/main", COMMIT, {"main": COMMIT})
    seen = parse_report(_report(head=f"refs/heads/{HOSTILE}", branches=[
        {"name": HOSTILE, "commit": OTHER}, {"name": "main", "commit": COMMIT}]))  # fmt: skip
    work = clone_work("demo-w1", start, CloneRefs.seen(seen))
    assert work["headBranch"] == "\\xff\\xfe"
    assert work["branchesChanged"] == [{"name": "\\xff\\xfe", "commit": OTHER}]
    assert valid_json(work) == work
