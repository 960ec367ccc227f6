"""Where a session's work is: the writer clone's head and the branches it changed, as
a throwaway container on the writer's host saw them (pool/claims/lease_ready.py WriterSlot.look);
the controller never reads the clone.

A summary, bounded whatever the clone holds: at most `listed` changed branches are
named (and at most `listed_bytes` of JSON text of them), the rest counted, with
`truncated`; a clone beyond the read limits (gitops/limits.py) gives a summary that
says so and names nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from writerpool.gitops.limits import LIMITS
from writerpool.state.writer import Baseline
from writerpool.utf8 import valid_text

if (
    TYPE_CHECKING
):  # types only: `serve` starts without the inspection's code (pool/writer/inspect.py)
    from writerpool.pool.writer.inspect import Inspection

UNCOMMITTED_NOTE = " It also holds uncommitted or untracked changes, collected as <branch>-wip."
HOST_NOTE = "This session works in the operator's checkout itself; nothing is collected."
READ_ONLY_NOTE = "A read-only session changes no files."


def collect_note(writer: str) -> str:
    return (
        f"The work stays in writer {writer} and reaches the operator's checkout only when "
        f"the operator collects it (as refs/remotes/writer-{writer}/<branch>)."
    )


@dataclass(frozen=True)
class CloneRefs:
    """A clone's HEAD and branches (short names), as the work view compares them: valid
    text, an undecodable byte of a name shown as `\\xNN` (utf8.py). The pool keeps the
    names as their bytes; these are only ever shown."""

    head: str
    head_commit: str | None
    branches: dict[str, str] = field(default_factory=dict)

    @classmethod
    def _shown(cls, head: str, commit: str | None, branches: dict[str, str]) -> CloneRefs:
        named = {valid_text(name): tip for name, tip in branches.items()}
        return cls(valid_text(head), commit, named)

    @classmethod
    def seen(cls, inspection: Inspection) -> CloneRefs:
        return cls._shown(inspection.head, inspection.head_commit, inspection.branches)

    @classmethod
    def of_baseline(cls, baseline: Baseline) -> CloneRefs:
        """A session starts on a writer the guard found exactly at its baseline."""
        return cls._shown(baseline.head, baseline.commit, baseline.branches)


def changed_branches(start: dict[str, str], now: dict[str, str]) -> list[dict[str, Any]]:
    """Branches created, moved or deleted since `start`, by name (bounded by the
    read limits: both maps hold at most LIMITS.refs names)."""
    names = sorted(set(start) | set(now))
    return [{"name": n, "commit": now.get(n)} for n in names if start.get(n) != now.get(n)]


def listed(items: list[dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """The first items that fit both `most` and LIMITS.listed_bytes of JSON text."""
    out: list[dict[str, Any]] = []
    used = 0
    for item in items[:most]:
        used += len(json.dumps(item))
        if used > LIMITS.listed_bytes:
            break
        out.append(item)
    return out


def _unread(writer: str, code: str) -> dict[str, Any]:
    why = " Its refs cannot be read at the moment."
    if code == "clone_over_cap":
        why = (
            f" Its clone holds more refs than writerpool reads (at most {LIMITS.refs}), so "
            f"no branch is named; `writerpool writer status {writer}` says what to run."
        )
    return {
        "headCommit": None,
        "headBranch": None,
        "branchesChanged": [],
        "branchesChangedCount": None,
        "truncated": code == "clone_over_cap",
        "note": collect_note(writer) + why,
    }


def clone_work(
    writer: str,
    start: CloneRefs | None,
    now: CloneRefs | str,
    uncommitted: bool | None = None,
    most: int = LIMITS.listed,
) -> dict[str, Any]:
    """Where a writer session's work is; `most` changed branches named at most.
    `uncommitted` is judged at close (None while the session runs, or when it could not
    be told)."""
    if isinstance(now, str):
        return {**_unread(writer, now), "uncommittedChanges": uncommitted}
    head = now.head.removeprefix("refs/heads/") if now.head.startswith("refs/heads/") else None
    before = start.branches if start is not None else {}
    changed = changed_branches(before, now.branches)
    shown = listed(changed, most)
    return {
        "headCommit": now.head_commit,
        "headBranch": head,
        "branchesChanged": shown,
        "branchesChangedCount": len(changed),
        "truncated": len(shown) < len(changed),
        "uncommittedChanges": uncommitted,
        "note": collect_note(writer) + (UNCOMMITTED_NOTE if uncommitted else ""),
    }


def other_work(read_only: bool) -> dict[str, Any]:
    note = READ_ONLY_NOTE if read_only else HOST_NOTE
    return {
        "headCommit": None,
        "headBranch": None,
        "branchesChanged": [],
        "branchesChangedCount": 0,
        "truncated": False,
        "note": note,
    }
