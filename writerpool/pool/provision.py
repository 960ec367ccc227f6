"""Provisioning one writer: a full clone from a bundle of the base, verified, recorded."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from writerpool.config.modes import LOCAL_HOST, ContainerSettings
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef, origin_url
from writerpool.gitops.bundle import OriginOutcome, clone_from_bundle, create_base_bundle
from writerpool.gitops.clone_read import read_refs
from writerpool.gitops.hostgit import git
from writerpool.gitops.verify import verify_clone
from writerpool.pool.clonetool.removal import remove_path
from writerpool.pool.verdicts import BOOKKEEPING
from writerpool.report import Report
from writerpool.runtime.host import Writer, WriterHost, writer_at
from writerpool.state.atomic import ensure_private_dir
from writerpool.state.writer import Baseline, BaseRecord, WriterState, load_state, save_state

MAX_WRITERS = 16


def writer_name(alias: str, index: int) -> str:
    return f"{alias}-w{index}"


def settings_digest(settings: ContainerSettings) -> str:
    """Digest of what a writer was provisioned with; a difference is never silently applied."""
    keys = {
        "image": settings.image,
        "network": settings.network,
        "cache": settings.cache,
        "tags": settings.tags,
    }
    return "sha256:" + hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()


def clone_branch(base: BaseRef) -> str:
    """The branch name inside the clone: a remote base `origin/x` becomes `x`."""
    return base.name.split("/", 1)[1] if base.ref.startswith("refs/remotes/") else base.name


def base_record(base: BaseRef) -> BaseRecord:
    return BaseRecord(name=base.name, ref=base.ref, commit=base.commit, branch=clone_branch(base))


def make_clone(
    writer: Writer, repo: Path, base: BaseRef, tags: bool, report: Report, target: str
) -> Baseline:
    """(Re)build the writer's clone from a bundle of the base; return its baseline."""
    staging = writer.scratch("clone.new")
    bundle = writer.scratch("provision.bundle")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        create_base_bundle(repo, base, tags, bundle)
        result = clone_from_bundle(bundle, staging, clone_branch(base), origin_url(repo))
        if result.origin is OriginOutcome.REFUSED:
            report.add(
                "remote_url_refused",
                "warning",
                target,
                "the origin URL carries credentials or an unsafe form; not copied",
            )
    finally:
        bundle.unlink(missing_ok=True)
    # A commit-graph lets later history walks stop at the base, so collecting one commit
    # costs the same in a long history (the clone is still ours: nothing ran in it yet).
    git(staging, "commit-graph", "write", "--reachable", timeout=1800, check=False)
    problems = verify_clone(staging)
    if problems:
        shutil.rmtree(staging, ignore_errors=True)
        raise WriterpoolError("clone_verification_failed", "unsafe clone: " + ", ".join(problems))
    (staging / ".git" / "hooks").mkdir(exist_ok=True)  # mounted read-only, so it must exist
    # Reflogs are not part of a baseline: reset removes them, so a fresh clone has none.
    remove_path(staging / ".git" / "logs")
    try:
        remove_path(writer.clone)  # any tree an agent left: see clonetool/removal.py
    except OSError as exc:
        raise WriterpoolError("writer_clone_failed", "the old clone cannot be removed") from exc
    staging.rename(writer.clone)
    refs = read_refs(writer.clone)
    return Baseline(
        head=refs.head,
        commit=refs.head_commit,
        branches=dict(refs.branches),
        tags={f"refs/tags/{name}": oid for name, oid in refs.tags.items()},
    )


def provision(
    paths: Paths,
    host: WriterHost,
    alias: str,
    name: str,
    repo: Path,
    settings: ContainerSettings,
    base: BaseRef,
    report: Report,
    placed: str = LOCAL_HOST,
) -> WriterState:
    """Provision (or finish an interrupted provisioning of) one writer; lease held. The
    state records `placed`, the host the writer is placed on; its storage is made through
    `host` (today the local one for every placement: docs/scale-out.md)."""
    target = f"writer/{alias}/{name}"
    writer = writer_at(paths, name, placed)
    ensure_private_dir(writer.record)
    state = WriterState(
        name=name,
        alias=alias,
        settings_digest=settings_digest(settings),
        image=settings.image,
        network=settings.network,
        cache=settings.cache,
        lifecycle=settings.lifecycle,
        tags=settings.tags,
        profiles=settings.profiles,
        base=base_record(base),
        host=placed,
    )
    # Recorded first, so a kill mid-way leaves a readable state that the next run redoes.
    save_state(writer.record, state)
    crash_point("provision.state_recorded")
    host.create_storage(writer, cache=False)
    baseline = make_clone(writer, repo, base, settings.tags == "reachable", report, target)
    crash_point("provision.cloned")
    host.create_storage(writer, cache=settings.cache != "none")
    state = save_state(
        writer.record,
        state.model_copy(
            update={"baseline": baseline, "phase": "not_ready", "reason": "writer_provisioned"}
        ),
    )
    report.add(
        "writer_provisioned",
        "ok",
        target,
        f"full clone of {base.name} at {base.commit[:12]}; not yet accepted",
    )
    return state


def existing_states(paths: Paths, alias: str) -> dict[int, WriterState | None]:
    """Writers of a workspace that have a directory, by index (None: no state file)."""
    found: dict[int, WriterState | None] = {}
    for index in range(1, MAX_WRITERS + 1):
        wdir = paths.writer_dir(writer_name(alias, index))
        # A removed writer leaves its lease files only: that is no writer.
        if wdir.is_dir() and any(p.name not in BOOKKEEPING for p in wdir.iterdir()):
            found[index] = load_state(wdir)
    return found
