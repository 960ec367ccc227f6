"""`writer collect`: export a writer's work as a bundle into the operator's checkout.

Only the bundle reaches host git. The clone is read in a throwaway container on the
writer's host (read-only mount, no network, nothing of the controller mounted) which
streams the inspection and the bundle out on its stdout (pool/collect_stream.py); the
controller verifies the bundle against the operator's checkout and fetches it to
`refs/remotes/writer-<name>/…`. Nothing is merged or checked out.

Crash safety: the stream is received into a private incoming directory (removed at the
next start), the bundle is renamed into `collections/`, refs are updated in one
transaction, and the digest is recorded last. Killed anywhere, the state file still
describes the previous collection and the next run redoes the whole export.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import UsageError, WriterpoolError
from writerpool.gitops.bundle import import_bundle, verify_bundle
from writerpool.gitops.hostgit import CommandFailed, git
from writerpool.pool.collect_rules import Decision, decide, shown, shown_path
from writerpool.pool.collect_stream import stream_collect
from writerpool.pool.container import writer_of
from writerpool.pool.inspect import (
    KIND_LABELS,
    Export,
    Inspection,
    inspect_writer,
)
from writerpool.pool.listing import unknown_writer
from writerpool.pool.review_refs import (
    aside_names,
    collected_refs,
    move_aside,
    replaced_by,
    report_replaced,
    staying,
)
from writerpool.pool.work import changed_branches, work_digest
from writerpool.pool.writers import operate
from writerpool.report import Report, Status, Step, quiet
from writerpool.runtime.host import WriterHost
from writerpool.state.atomic import ensure_private_dir, write_atomic
from writerpool.state.writer import Collection, WriterState, load_state, now, save_state

Outcome = Literal["collected", "nothing", "incomplete"]
NOTHING = "no changed branch and no uncommitted work"
WRITER_NAME = re.compile(r"([a-z][a-z0-9_-]{0,63})-w([1-9]|1[0-6])")


@dataclass(frozen=True)
class WriterRef:
    """A writer named on the command line that has a directory."""

    paths: Paths
    name: str
    alias: str

    @property
    def target(self) -> str:
        return f"writer/{self.alias}/{self.name}"

    def load(self) -> WriterState:
        state = load_state(self.paths.writer_dir(self.name))
        if state is None:
            raise WriterpoolError("writer_state_invalid", "the writer has no state file")
        return state


def find_writer(paths: Paths, name: str) -> WriterRef:
    match = WRITER_NAME.fullmatch(name)
    if match is None:
        raise UsageError("a writer name looks like ALIAS-wN (N from 1 to 16)")
    if not paths.writer_dir(name).is_dir():
        raise unknown_writer(paths, name)
    return WriterRef(paths, name, match.group(1))


@contextmanager
def findings_for(report: Report, target: str) -> Iterator[None]:
    """Report an expected failure as a finding on the writer (usage errors still exit 2)."""
    try:
        yield
    except UsageError:
        raise
    except WriterpoolError as exc:
        report.add(exc.code, "error", target, exc.message)


def workspace_repo(loaded: LoadedConfig, alias: str) -> Path:
    repo = loaded.config.workspaces.get(alias)
    if repo is None:
        raise UsageError(f"workspace {alias} is not configured", code="alias_unknown")
    return repo


@dataclass(frozen=True)
class CollectOutcome:
    status: Outcome
    inspection: Inspection
    digest: str | None


def remote_prefix(name: str) -> str:
    return f"refs/remotes/writer-{name}/"


def _point_refs(repo: Path, updates: list[tuple[str, str]]) -> None:
    """Set refs to commits the checkout already has (no new history, so not in the bundle)."""
    if not updates:
        return
    try:
        for _, commit in updates:
            git(repo, "cat-file", "-e", f"{commit}^{{commit}}", timeout=60)
        lines = "".join(f"update {ref} {commit}\n" for ref, commit in updates)
        git(repo, "update-ref", "--stdin", input=lines.encode(), timeout=300)
    except CommandFailed as exc:
        raise WriterpoolError("writer_collect_failed", "updating collected refs failed") from exc


def _import(
    repo: Path, name: str, inspection: Inspection, accepted: list[Export], bundle: Path | None
) -> None:
    in_bundle = [e for e in accepted if e.in_bundle]
    if in_bundle:
        if bundle is None:
            raise WriterpoolError("writer_collect_failed", "the bundle is missing")
        heads = {(r.ref, r.commit) for r in verify_bundle(repo, bundle)}
        # The bundle also carries refused refs (under synthetic names); none is imported.
        if heads != {(e.ref, e.commit) for e in inspection.exports if e.in_bundle}:
            raise WriterpoolError("writer_collect_failed", "the bundle holds unplanned refs")
        mapping = [(e.ref or "", remote_prefix(name) + e.name) for e in in_bundle]
        import_bundle(repo, bundle, mapping)
    _point_refs(
        repo, [(remote_prefix(name) + e.name, e.commit or "") for e in accepted if not e.in_bundle]
    )


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def _keep_bundle(
    collections: Path,
    incoming: Path,
    inspection: Inspection,
    digest: str,
    decision: Decision,
    replaced: dict[str, str],
) -> Path | None:
    """Move the bundle under collections/ with a manifest beside it (kept for audit)."""
    stem = f"{_stamp()}-{digest.removeprefix('sha256:')[:12]}"
    bundle = None
    if inspection.bundle is not None:
        bundle = collections / f"{stem}.bundle"
        os.replace(incoming / inspection.bundle, bundle)
    manifest = {
        "schemaVersion": 1, "at": now(), "digest": digest,
        "bundle": bundle.name if bundle else None,
        "refs": [{"name": e.name, "kind": e.kind, "commit": e.commit, "bundleRef": e.ref}
                 for e in decision.accepted],
        "refused": [{"name": r.name, "reason": r.reason} for r in decision.refused],
        "replaced": [{"ref": ref, "commit": c} for ref, c in sorted(replaced.items())],
    }  # fmt: skip
    write_atomic(
        collections / f"{stem}.json",
        (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
    )
    return bundle


def _clear_incoming(collections: Path) -> None:
    for stale in collections.glob(".incoming-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _report_unsafe_clone(report: Report, inspection: Inspection, target: str) -> None:
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


def _report_stash(report: Report, inspection: Inspection, target: str) -> None:
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


def _report_unexportable(
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


def _report_leftovers(report: Report, inspection: Inspection, target: str) -> None:
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


def _report_refused(report: Report, decision: Decision, target: str, status: Status) -> None:
    for refusal in decision.refused:
        report.add(
            "ref_name_refused",
            status,
            target,
            f"branch {shown(refusal.name)} not collected: {refusal.reason}",
            remedy="rename it inside the writer and collect again, or reset with --discard",
            name=ascii(refusal.name)[1:-1][:300],
        )


def collect_writer(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    report: Report,
    step: Step = quiet,
    keep_old: bool = False,
) -> CollectOutcome:
    """Collect a leased, fenced writer's work; record the digest when complete. Earlier
    review refs the new ones overwrite move aside unless `keep_old` (pool/review_refs.py)."""
    if state.baseline is None:
        raise WriterpoolError("writer_state_invalid", "the writer was never fully provisioned")
    target = f"writer/{state.alias}/{state.name}"
    repo = workspace_repo(loaded, state.alias)
    collections = writer_of(paths, state).collections
    ensure_private_dir(collections)
    _clear_incoming(collections)
    incoming = collections / f".incoming-{secrets.token_hex(6)}"
    ensure_private_dir(incoming)
    try:
        step("inspecting the clone and streaming the bundle from a throwaway container")
        inspection = stream_collect(paths, host, state, loaded.config.pool, incoming)
        _report_unsafe_clone(report, inspection, target)
        digest = work_digest(inspection, state.baseline)
        _report_stash(report, inspection, target)
        _report_leftovers(report, inspection, target)
        if digest is None:
            report.add("nothing_to_collect", "ok", target, NOTHING)
            return CollectOutcome("nothing", inspection, None)
        old = collected_refs(repo, remote_prefix(state.name))
        decision = decide(inspection, _kept_names(old, state.name, keep_old))
        _report_unexportable(report, inspection, target, "error")
        new = _written(state.name, decision)
        replaced = {} if keep_old else replaced_by(old, new)
        bundle = _keep_bundle(collections, incoming, inspection, digest, decision, replaced)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    crash_point("collect.bundle_kept")
    step("verifying the bundle and importing its refs into the checkout")
    moves = aside_names(repo, state.name, replaced)
    move_aside(repo, replaced, moves)
    _import(repo, state.name, inspection, decision.accepted, bundle)
    crash_point("collect.imported")
    complete = decision.complete
    save_state(
        paths.writer_dir(state.name),
        state.model_copy(
            update={
                "collection": Collection(
                    digest=digest,
                    complete=complete,
                    at=now(),
                    bundle=bundle.name if bundle else None,
                    refs=tuple(sorted(new)),
                )
            }
        ),
    )
    _report_collected(report, state, decision, bundle, target)
    aside = {ref: (commit, moves[ref]) for ref, commit in replaced.items()}
    report_replaced(report, target, state.name, aside, staying(old, new, replaced), False)
    return CollectOutcome("collected" if complete else "incomplete", inspection, digest)


def _kept_names(old: dict[str, str], name: str, keep_old: bool) -> set[str]:
    """Short names of earlier review refs that stay beside the new ones."""
    return {ref.removeprefix(remote_prefix(name)) for ref in old} if keep_old else set()


def _written(name: str, decision: Decision) -> dict[str, str]:
    return {remote_prefix(name) + e.name: e.commit or "" for e in decision.accepted}


def _report_collected(
    report: Report, state: WriterState, decision: Decision, bundle: Path | None, target: str
) -> None:
    _report_refused(report, decision, target, "error")
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


def plan_collect(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    report: Report,
    keep_old: bool = False,
) -> CollectOutcome:
    """What collect would export and refuse; changes nothing."""
    if state.baseline is None:
        raise WriterpoolError("writer_state_invalid", "the writer was never fully provisioned")
    target = f"writer/{state.alias}/{state.name}"
    inspection = inspect_writer(paths, host, state, loaded.config.pool)
    digest = work_digest(inspection, state.baseline)
    _report_stash(report, inspection, target)
    _report_leftovers(report, inspection, target)
    if digest is None:
        report.add("nothing_to_collect", "ok", target, NOTHING)
        return CollectOutcome("nothing", inspection, None)
    repo = workspace_repo(loaded, state.alias)
    old = collected_refs(repo, remote_prefix(state.name))
    decision = decide(inspection, _kept_names(old, state.name, keep_old))
    _report_refused(report, decision, target, "warning")
    _report_unexportable(report, inspection, target, "warning")
    names = [e.name for e in decision.accepted]
    changed = changed_branches(inspection, state.baseline)
    report.add(
        "writer_collect_planned",
        "planned",
        target,
        f"would import {len(names)} ref(s) under refs/remotes/writer-{state.name}/"
        + ("" if decision.complete else f" (incomplete: {decision.incompleteness()})"),
        refs=[remote_prefix(state.name) + n for n in names],
        changedBranches=len(changed),
    )
    new = _written(state.name, decision)
    replaced = {} if keep_old else replaced_by(old, new)
    moves = aside_names(repo, state.name, replaced)
    aside = {ref: (commit, moves[ref]) for ref, commit in replaced.items()}
    report_replaced(report, target, state.name, aside, staying(old, new, replaced), True)
    status: Outcome = "collected" if decision.complete else "incomplete"
    return CollectOutcome(status, inspection, digest)


def collect(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    name: str,
    apply: bool,
    step: Step = quiet,
    keep_old: bool = False,
) -> Report:
    """`writer collect NAME [--keep-old] [--apply]`, under the writer's lease and fence."""
    report = Report("writer collect")
    ref: WriterRef = find_writer(paths, name)
    with (
        findings_for(report, ref.target),
        operate(paths, host, loaded.config.pool.lease_wait_seconds, name),
    ):
        state = ref.load()
        if apply:
            collect_writer(paths, host, loaded, state, report, step, keep_old)
        else:
            plan_collect(paths, host, loaded, state, report, keep_old)
    return report
