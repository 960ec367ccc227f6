"""Which refs a collection imports and which it refuses (`ref_name_refused`).

Names come from a clone an agent controlled. They are imported as
`refs/remotes/writer-<name>/<branch>` only when writerpool's name rules accept them,
when they do not collide with a branch of the clone (the `-wip` and `detached-head`
names), and when they do not nest with another imported name (git stores refs as
files: `x` and `x/y` cannot both exist).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from writerpool.gitops.refnames import refuse_reason
from writerpool.pool.writer.inspect import Export, Inspection
from writerpool.report import sanitize


@dataclass(frozen=True)
class Refusal:
    name: str
    reason: str


@dataclass
class Decision:
    accepted: list[Export] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # why the WIP commit is not whole

    @property
    def complete(self) -> bool:
        return not self.refused and not self.blocked

    def incompleteness(self) -> str:
        parts = [f"{len(self.refused)} ref(s) refused"] if self.refused else []
        return "; ".join(parts + self.blocked)


def shown(name: str) -> str:
    """A ref name as it may appear in a message: escaped and bounded."""
    text = ascii(name)[1:-1]
    if sanitize(text) != text:  # a name shaped like a path would be blanked in the report
        return "(a path-like name; see the JSON report)"
    return text if len(text) <= 60 else text[:57] + "..."


def shown_path(path: str) -> str:
    """A work-tree path as it may appear in a message: escaped and bounded."""
    text = ascii(path)[1:-1]
    return text if len(text) <= 80 else text[:77] + "..."


def _nests(a: str, b: str) -> bool:
    # git keeps refs as files: `x` and `x/y` cannot both exist.
    return a.startswith(b + "/") or b.startswith(a + "/")


def _candidates(inspection: Inspection) -> list[Export]:
    """Every ref collection should export, in a stable order (branches, detached, WIP)."""
    found = list(inspection.exports)
    for name in sorted(inspection.problems):
        found.append(Export(name=name, kind="branch"))
    order = {"branch": 0, "detached": 1, "wip": 2}
    return sorted(found, key=lambda e: (order[e.kind], e.name))


def _reason(
    export: Export, inspection: Inspection, taken: list[str], existing: set[str]
) -> str | None:
    if export.name in inspection.problems:
        return f"the branch cannot be read ({inspection.problems[export.name]})"
    label = export.name.removesuffix("-wip") if export.kind == "wip" else export.name
    reason = refuse_reason(label) or refuse_reason(export.name)
    if reason is not None:
        return reason
    if export.kind != "branch" and (
        export.name in inspection.branches or export.name in inspection.problems
    ):
        return "a branch of the clone has the same name"
    if any(_nests(export.name, other) for other in taken):
        return "nests with another collected name"
    if any(_nests(export.name, other) for other in existing):
        return "nests with a ref an earlier collection imported; delete that ref to proceed"
    return None


def decide(inspection: Inspection, existing: set[str]) -> Decision:
    """Which refs are imported and which are refused (ref_name_refused)."""
    decision = Decision()
    taken: list[str] = []
    for export in _candidates(inspection):
        reason = _reason(export, inspection, taken, existing)
        if reason is None:
            decision.accepted.append(export)
            taken.append(export.name)
        else:
            decision.refused.append(Refusal(export.name, reason))
    if inspection.unexported_count:
        decision.blocked.append(
            f"{inspection.unexported_count} path(s) of work cannot be exported "
            "(see writer_work_unexportable)"
        )
    if inspection.new_extra_refs:
        decision.blocked.append(
            f"{len(inspection.new_extra_refs)} ref(s) outside refs/heads reach new history "
            "and are not exported"
        )
    return decision
