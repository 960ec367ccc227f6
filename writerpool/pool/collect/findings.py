"""The findings a collection (or its plan) reports on a writer: what it imported, what
it refused or could not carry, and what it leaves behind."""

from __future__ import annotations

from pathlib import Path

from writerpool.pool.collect.rules import Decision, shown, shown_path
from writerpool.pool.writer.inspect import KIND_LABELS, Inspection
from writerpool.report import Report, Status
from writerpool.state.writer import WriterState

NOTHING = "no changed branch and no uncommitted work"


def remote_prefix(name: str) -> str:
    return f"refs/remotes/writer-{name}/"


def report_unsafe_clone(report: Report, inspection: Inspection, target: str) -> None:
    # Collection does not depend on it (host git never reads the clone), but say so.
    problems = inspection.clone_problems
    if problems:
        report.add(
            "clone_verification_failed",
            "warning",
            target,
            "the clone's git settings were tampered with ("
            + ", ".join(problems[:3])
            + "); collected anyway, since only the bundle reaches host git",
            remedy="reset or recreate rebuilds the clone",
        )


def report_stash(report: Report, inspection: Inspection, target: str) -> None:
    if inspection.stash:
        report.add(
            "writer_stash_present",
            "warning",
            target,
            "the clone holds a stash, which is never collected; reset, recreate, remove "
            "and finish refuse until it is dropped inside the writer or --discard is given",
        )


REMEDY = {
    "nested_repo": "commit it in the clone's own history (or push it to a branch of the "
    "clone) inside the writer, or remove it",
    "dot_git": "rename the directory inside the writer: git cannot hold a path named .git",
    "unreadable": "make it readable inside the writer",
    "too_large": "shrink or remove the file inside the writer, or raise "
    "[pool] collect_max_file_bytes",
    "over_total": "remove files inside the writer, or raise [pool] collect_max_total_bytes",
    "refused_name": "rename it inside the writer: git refuses the name",
}


def report_unexportable(
    report: Report, inspection: Inspection, target: str, status: Status
) -> None:
    """Work the collection cannot carry: each named with its path and size."""
    for entry in inspection.unexported:
        report.add(
            "writer_work_unexportable",
            status,
            target,
            f"{KIND_LABELS[entry.kind]} {shown_path(entry.path)} ({entry.size} bytes) is "
            "not collected; the collection is incomplete",
            remedy=REMEDY[entry.kind] + "; then collect again, or reset with --discard",
            kind=entry.kind,
            path=ascii(entry.path)[1:-1][:1000],
            size=entry.size,
        )
    hidden = inspection.unexported_count - len(inspection.unexported)
    if hidden > 0:
        report.add("writer_work_unexportable", status, target,
                   f"{hidden} more path(s) of work are not collected (not listed)")  # fmt: skip
    for name in inspection.new_extra_refs:
        report.add(
            "writer_work_unexportable",
            status,
            target,
            f"ref {shown(name)} reaches commits no branch holds; refs outside refs/heads "
            "are not collected",
            remedy="make a branch at it inside the writer and collect again, or reset "
            "with --discard",
            kind="ref",
            name=ascii(name)[1:-1][:300],
        )


def report_leftovers(report: Report, inspection: Inspection, target: str) -> None:
    """What is neither work nor the baseline: never collected; the next lease, finish or
    reset removes it."""
    kinds = [k for k in ("ignored", "special", "directory") if inspection.counts.get(k)]
    if not kinds:
        return
    parts = []
    for kind in kinds:
        named = [e for e in inspection.leftovers if e.kind == kind][:3]
        parts.append(f"{inspection.counts[kind]} {KIND_LABELS[kind]} ("
                     + ", ".join(shown_path(e.path) for e in named) + ")")  # fmt: skip
    report.add(
        "writer_leftovers_present",
        "ok",
        target,
        "not collected (not work): "
        + "; ".join(parts)
        + "; the next lease, finish or reset removes them",
        counts={k: inspection.counts[k] for k in kinds},
    )


def report_refused(report: Report, decision: Decision, target: str, status: Status) -> None:
    for refusal in decision.refused:
        report.add(
            "ref_name_refused",
            status,
            target,
            f"branch {shown(refusal.name)} not collected: {refusal.reason}",
            remedy="rename it inside the writer and collect again, or reset with --discard",
            name=ascii(refusal.name)[1:-1][:300],
        )


def report_collected(
    report: Report, state: WriterState, decision: Decision, bundle: Path | None, target: str
) -> None:
    report_refused(report, decision, target, "error")
    names = [remote_prefix(state.name) + e.name for e in decision.accepted]
    name = bundle.name if bundle else None
    size = bundle.stat().st_size if bundle else 0
    if not decision.complete:
        report.add(
            "writer_collect_incomplete",
            "error",
            target,
            f"{decision.incompleteness()}; {len(names)} ref(s) imported; "
            "this collection authorizes no cleanup",
            refs=names,
            bundle=name,
            bundleBytes=size,
        )
        return
    report.add(
        "writer_collected",
        "ok",
        target,
        f"imported {len(names)} ref(s) under refs/remotes/writer-{state.name}/ "
        "(untrusted until reviewed; nothing merged)",
        refs=names,
        bundle=name,
        bundleBytes=size,
    )
