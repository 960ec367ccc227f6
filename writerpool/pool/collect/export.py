"""`writer collect`: export a writer's work as a bundle into the operator's checkout.

Only the bundle reaches host git. The clone is read in a throwaway container on the
writer's host (read-only mount, no network, nothing of the controller mounted) which
streams the inspection and the bundle out on its stdout (pool/collect/stream.py); the
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
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.gitops.bundle import import_bundle, verify_bundle
from writerpool.gitops.hostgit import CommandFailed, git, git_reason
from writerpool.pool.collect.findings import (
    NOTHING,
    remote_prefix,
    report_collected,
    report_leftovers,
    report_refused,
    report_stash,
    report_unexportable,
    report_unsafe_clone,
)
from writerpool.pool.collect.ref_locks import clear_stale_locks
from writerpool.pool.collect.review_refs import (
    aside_names,
    collected_refs,
    move_aside,
    replaced_by,
    report_replaced,
    staying,
)
from writerpool.pool.collect.rules import Decision, decide
from writerpool.pool.collect.stream import stream_collect
from writerpool.pool.provision.reconcile import operate
from writerpool.pool.provision.writer_ref import (
    WriterRef,
    find_writer,
    findings_for,
    workspace_repo,
)
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.inspect import Export, Inspection, inspect_writer
from writerpool.pool.writer.work import changed_branches, work_digest
from writerpool.report import Report, Step, quiet
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import Collection, WriterState, now, save_state

Outcome = Literal["collected", "nothing", "incomplete"]


@dataclass(frozen=True)
class CollectOutcome:
    status: Outcome
    inspection: Inspection
    digest: str | None


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
        message = f"updating collected refs failed: {git_reason(exc)}"
        raise WriterpoolError("writer_collect_failed", message) from exc


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
    review refs the new ones overwrite move aside unless `keep_old`
    (pool/collect/review_refs.py)."""
    if state.baseline is None:
        raise WriterpoolError("writer_state_invalid", "the writer was never fully provisioned")
    target = f"writer/{state.alias}/{state.name}"
    repo = workspace_repo(loaded, state.alias)
    collections = writer_of(paths, state).record.collections
    ensure_private_dir(collections)
    _clear_incoming(collections)
    incoming = collections / f".incoming-{secrets.token_hex(6)}"
    ensure_private_dir(incoming)
    try:
        step("inspecting the clone and streaming the bundle from a throwaway container")
        inspection = stream_collect(paths, host, state, loaded.config.pool, incoming)
        report_unsafe_clone(report, inspection, target)
        digest = work_digest(inspection, state.baseline)
        report_stash(report, inspection, target)
        report_leftovers(report, inspection, target)
        if digest is None:
            report.add("nothing_to_collect", "ok", target, NOTHING)
            return CollectOutcome("nothing", inspection, None)
        old = collected_refs(repo, remote_prefix(state.name))
        decision = decide(inspection, _kept_names(old, state.name, keep_old))
        report_unexportable(report, inspection, target, "error")
        new = _written(state.name, decision)
        replaced = {} if keep_old else replaced_by(old, new)
        bundle = _keep_bundle(collections, incoming, inspection, digest, decision, replaced)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    crash_point("collect.bundle_kept")
    step("verifying the bundle and importing its refs into the checkout")
    clear_stale_locks(repo, state.name, report, target)
    moves = aside_names(repo, state.name, replaced)
    move_aside(repo, replaced, moves)
    _import(repo, state.name, inspection, decision.accepted, bundle)
    crash_point("collect.imported")
    _record_collection(paths, state, digest, decision.complete, bundle, new)
    report_collected(report, state, decision, bundle, target)
    aside = {ref: (commit, moves[ref]) for ref, commit in replaced.items()}
    report_replaced(report, target, state.name, aside, staying(old, new, replaced), False)
    return CollectOutcome("collected" if decision.complete else "incomplete", inspection, digest)


def _record_collection(
    paths: Paths, state: WriterState, digest: str, complete: bool, bundle: Path | None,
    refs: dict[str, str],
) -> None:  # fmt: skip
    collection = Collection(
        digest=digest,
        complete=complete,
        at=now(),
        bundle=bundle.name if bundle else None,
        refs=tuple(sorted(refs)),
    )
    save_state(paths.writer_dir(state.name), state.model_copy(update={"collection": collection}))


def _kept_names(old: dict[str, str], name: str, keep_old: bool) -> set[str]:
    """Short names of earlier review refs that stay beside the new ones."""
    return {ref.removeprefix(remote_prefix(name)) for ref in old} if keep_old else set()


def _written(name: str, decision: Decision) -> dict[str, str]:
    return {remote_prefix(name) + e.name: e.commit or "" for e in decision.accepted}


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
    report_stash(report, inspection, target)
    report_leftovers(report, inspection, target)
    if digest is None:
        report.add("nothing_to_collect", "ok", target, NOTHING)
        return CollectOutcome("nothing", inspection, None)
    repo = workspace_repo(loaded, state.alias)
    old = collected_refs(repo, remote_prefix(state.name))
    decision = decide(inspection, _kept_names(old, state.name, keep_old))
    report_refused(report, decision, target, "warning")
    report_unexportable(report, inspection, target, "warning")
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
