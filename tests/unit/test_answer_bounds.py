"""Tool answers stay bounded whatever a writer's clone or an agent's text holds."""

from __future__ import annotations

import json

from writerpool.gitops.limits import ANSWER_MAX_BYTES, LIMITS
from writerpool.sessions.contract.answers import LIST_BYTES, fit_list, sendable
from writerpool.sessions.turns import PAGE_JSON_BYTES, page_of
from writerpool.sessions.work import CloneRefs, clone_work

COMMIT = "a" * 40


def _refs(branches: dict[str, str]) -> CloneRefs:
    return CloneRefs(head="refs/heads/main", head_commit=COMMIT, branches=branches)


def test_changed_branches_past_the_cap_are_counted_and_flagged() -> None:
    start = _refs({"main": COMMIT})
    now = _refs({"main": COMMIT, **{f"b{i:05d}": COMMIT for i in range(LIMITS.refs - 1)}})
    work = clone_work("w1", start, now)
    assert work["branchesChangedCount"] == LIMITS.refs - 1
    assert len(work["branchesChanged"]) == LIMITS.listed
    assert work["truncated"] is True
    assert work["branchesChanged"][0] == {"name": "b00000", "commit": COMMIT}
    assert len(json.dumps(work)) < 8 * 1024


def test_long_escaped_names_are_listed_within_the_byte_budget() -> None:
    name = "\udcff" * LIMITS.ref_name_bytes  # each byte escapes to six characters
    now = _refs({f"{i}{name}": COMMIT for i in range(LIMITS.listed)})
    work = clone_work("w1", _refs({}), now)
    assert 0 < len(work["branchesChanged"]) < LIMITS.listed and work["truncated"] is True
    assert len(json.dumps(work["branchesChanged"])) <= LIMITS.listed_bytes


def test_a_clone_over_the_read_cap_gives_a_summary_naming_nothing() -> None:
    work = clone_work("w1", _refs({}), "clone_over_cap")
    assert (work["branchesChanged"], work["branchesChangedCount"]) == ([], None)
    assert work["truncated"] is True
    assert "writerpool writer status w1" in work["note"]
    few = clone_work("w1", _refs({}), _refs({"x": COMMIT}))
    assert (few["branchesChangedCount"], few["truncated"]) == (1, False)


def test_the_session_list_leaves_out_the_oldest_closed_sessions_first() -> None:
    def view(i: int, state: str) -> dict[str, object]:
        return {"sessionId": f"s-{i}", "state": state, "pad": "x" * 20_000}

    views = [view(i, "closed" if i % 2 else "idle") for i in range(20)]
    shown, omitted = fit_list(views, LIST_BYTES)
    assert len(json.dumps(shown)) <= LIST_BYTES and omitted == 20 - len(shown) > 0
    kept = [v["sessionId"] for v in shown]
    assert all(f"s-{i}" in kept for i in range(0, 20, 2))  # every open session stays
    assert "s-1" not in kept and "s-19" in kept
    assert fit_list(views[:3], LIST_BYTES) == (views[:3], 0)


def test_a_text_page_of_escaped_characters_ends_early_and_pages_on() -> None:
    text = "\x01" * 60_000  # six bytes each in JSON
    page, next_offset = page_of(text, 0, 65_536)
    assert len(json.dumps(page)) <= PAGE_JSON_BYTES
    assert next_offset == len(page) < len(text)
    assert page_of("plain", 0, 100) == ("plain", None)


def test_an_answer_over_the_cap_becomes_an_error_instead() -> None:
    small = {"ok": True, "x": "y"}
    assert sendable("pi_session_list", small) == small
    big = sendable("pi_session_list", {"ok": True, "x": "y" * ANSWER_MAX_BYTES})
    assert (big["ok"], big["error"]["code"]) == (False, "answer_too_large")
