"""The rules behind collection, fed inspections as the container reports them
(no processes): which refs are refused, what the work digest covers, when cleanup
is authorized, and what the session guard accepts."""

from __future__ import annotations

from writerpool.pool.collect.rules import decide, shown
from writerpool.pool.writer.inspect import Export, Inspection, ToolReport, at_baseline
from writerpool.pool.writer.work import uncollected_reason, work_digest
from writerpool.state.writer import Baseline, BaseRecord, Collection, WriterState

BASE = "a" * 40
C1, C2, C3 = "1" * 40, "2" * 40, "3" * 40
TREE = "e" * 40
BASELINE = Baseline(head="refs/heads/main", commit=BASE, branches={"main": BASE})

# A report as the clonetool package prints it for a clone with one new branch and WIP on it.
RECORDED = {
    "head": "refs/heads/feature",
    "head_commit": C1,
    "branches": [
        {"name": "feature", "commit": C1, "problem": None},
        {"name": "main", "commit": BASE, "problem": None},
        {"name": "linked", "commit": None, "problem": "not a plain file"},
    ],
    "stash": False,
    "tags": 2,
    "dirty": True,
    "wip_tree": TREE,
    "exports": [
        {"name": "feature", "commit": C1, "kind": "branch"},
        {"name": "feature-wip", "commit": None, "kind": "wip"},
    ],
    "bundle": None,
}


def _inspection(**changes: object) -> Inspection:
    data = dict(RECORDED)
    data.update(changes)
    return Inspection.from_report(ToolReport.model_validate(data))


def _state(collection: Collection | None = None) -> WriterState:
    return WriterState(
        name="demo-w1", alias="demo", settings_digest="sha256:x", image="default",
        network="none", cache="none", lifecycle="persistent", tags="none",
        profiles=("code",), base=BaseRecord(name="main", ref="refs/heads/main", commit=BASE,
                                            branch="main"),
        baseline=BASELINE, collection=collection,
    )  # fmt: skip


def test_recorded_report_parses_into_an_inspection() -> None:
    found = _inspection()
    assert found.branches == {"feature": C1, "main": BASE}
    assert found.problems == {"linked": "not a plain file"}
    assert found.tags == 2 and found.dirty and found.wip_tree == TREE


def test_unreadable_and_unsafe_names_are_refused_and_safe_ones_accepted() -> None:
    exports = [
        {"name": "feature", "commit": C1, "kind": "branch"},
        {"name": "-x", "commit": C1, "kind": "branch"},
        {"name": "a..b", "commit": C1, "kind": "branch"},
        {"name": "x" * 201, "commit": C1, "kind": "branch"},
        {"name": "feature-wip", "commit": None, "kind": "wip"},
    ]
    decision = decide(_inspection(exports=exports), existing=set())
    assert [e.name for e in decision.accepted] == ["feature", "feature-wip"]
    assert {r.name for r in decision.refused} == {"-x", "a..b", "x" * 201, "linked"}


def test_wip_name_colliding_with_a_branch_is_refused() -> None:
    branches = [
        {"name": "feature", "commit": C1, "problem": None},
        {"name": "feature-wip", "commit": C2, "problem": None},
    ]
    exports = [
        {"name": "feature", "commit": C1, "kind": "branch"},
        {"name": "feature-wip", "commit": C2, "kind": "branch"},
        {"name": "feature-wip", "commit": None, "kind": "wip"},
    ]
    decision = decide(_inspection(branches=branches, exports=exports), existing=set())
    assert [(e.name, e.kind) for e in decision.accepted] == [
        ("feature", "branch"),
        ("feature-wip", "branch"),
    ]
    assert [r.reason for r in decision.refused] == ["a branch of the clone has the same name"]


def test_names_that_nest_with_earlier_collected_refs_are_refused() -> None:
    exports = [
        {"name": "topic/one", "commit": C1, "kind": "branch"},
        {"name": "other", "commit": C2, "kind": "branch"},
    ]
    branches = [
        {"name": "topic/one", "commit": C1, "problem": None},
        {"name": "other", "commit": C2, "problem": None},
    ]
    inspection = _inspection(exports=exports, branches=branches, dirty=False, wip_tree=None)
    decision = decide(inspection, existing={"topic", "other"})
    assert [e.name for e in decision.accepted] == ["other"]  # updating "other" is fine
    assert [r.name for r in decision.refused] == ["topic/one"]


def test_digest_covers_branches_wip_and_head_but_not_tags() -> None:
    digest = work_digest(_inspection(), BASELINE)
    assert digest is not None and digest.startswith("sha256:")
    assert work_digest(_inspection(tags=9), BASELINE) == digest
    assert work_digest(_inspection(wip_tree="f" * 40), BASELINE) != digest
    assert work_digest(_inspection(head_commit=C2), BASELINE) != digest
    clean = _inspection(
        head="refs/heads/main",
        head_commit=BASE,
        dirty=False,
        wip_tree=None,
        exports=[],
        branches=[{"name": "main", "commit": BASE}],
    )
    assert work_digest(clean, BASELINE) is None


def test_only_a_complete_collection_of_the_same_digest_authorizes_cleanup() -> None:
    inspection = _inspection()
    digest = work_digest(inspection, BASELINE)
    assert digest is not None
    assert uncollected_reason(inspection, _state()) is not None
    partial = Collection(digest=digest, complete=False, at="t")
    assert uncollected_reason(inspection, _state(partial)) is not None
    full = Collection(digest=digest, complete=True, at="t")
    assert uncollected_reason(inspection, _state(full)) is None
    moved = _inspection(wip_tree="f" * 40)
    assert uncollected_reason(moved, _state(full)) is not None
    stashed = _inspection(stash=True)
    assert "stash" in (uncollected_reason(stashed, _state(full)) or "")


def test_session_guard_accepts_only_the_exact_baseline() -> None:
    clean = _inspection(
        head="refs/heads/main",
        head_commit=BASE,
        dirty=False,
        wip_tree=None,
        exports=[],
        branches=[{"name": "main", "commit": BASE}],
    )
    assert at_baseline(clean, BASELINE)
    for change in (
        {"stash": True},
        {"dirty": True},
        {"head": "detached"},
        {"branches": [{"name": "main", "commit": BASE}, {"name": "x", "commit": BASE}]},
        {"branches": [{"name": "main", "commit": BASE}, {"name": "bad", "problem": "symbolic"}]},
    ):
        changed = Inspection.from_report(
            ToolReport.model_validate(
                {
                    **RECORDED,
                    "head": "refs/heads/main",
                    "head_commit": BASE,
                    "dirty": False,
                    "wip_tree": None,
                    "exports": [],
                    "branches": [{"name": "main", "commit": BASE}],
                    **change,
                }
            )
        )
        assert not at_baseline(changed, BASELINE), change


def test_names_in_messages_are_escaped_and_bounded() -> None:
    assert shown("feature") == "feature"
    assert shown("ctl\x01") == "ctl\\x01"
    assert len(shown("n" * 500)) == 60
    assert "path-like" in shown("../x")
    assert Export(name="x", kind="wip").commit is None
