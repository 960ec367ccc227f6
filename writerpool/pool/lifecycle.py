"""Reset, recreate, finish and remove a writer.

Each runs under the writer's lease and fence, and each refuses a writer whose work
no complete collection covers (`writer_uncollected`) unless the operator passes
--discard (finish takes no --discard: it collects first and stops when it cannot).
Reset runs git only inside a throwaway container; the host checks the result with
reads that execute nothing, and rebuilds the clone when the check fails.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef, default_base_name, resolve_base
from writerpool.gitops.bundle import create_base_bundle, merged_tags
from writerpool.pool.baseline import clear_cache, writer_problems
from writerpool.pool.clonetool.removal import remove_path
from writerpool.pool.collect import (
    WriterRef,
    collect_writer,
    find_writer,
    findings_for,
    plan_collect,
    workspace_repo,
)
from writerpool.pool.container import writer_of
from writerpool.pool.inspect import inspect_writer, run_tool, tool_spec
from writerpool.pool.provision import base_record
from writerpool.pool.provision_stream import clone_on_host
from writerpool.pool.work import discarded, uncollected_reason
from writerpool.pool.writers import delete_writer_files, operate
from writerpool.report import Report, Status, Step, quiet, sanitize
from writerpool.runtime.host import WriterHost, writer_at
from writerpool.state.atomic import ensure_private_dir
from writerpool.state.writer import Baseline, WriterState, load_state, save_state


def _target(state: WriterState) -> str:
    return f"writer/{state.alias}/{state.name}"


def workspace_base(paths: Paths, loaded: LoadedConfig, alias: str) -> BaseRef:
    """The workspace's default base: the one its mode entry records, else the checkout's."""
    repo = workspace_repo(loaded, alias)
    entry = load_modes(paths).workspaces.get(alias)
    name = entry.container.base if entry and entry.container and entry.container.base else None
    return resolve_base(repo, name or default_base_name(repo))


def guard(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    discard: bool,
    report: Report,
    apply: bool = True,
) -> bool:
    """May this destructive operation go ahead? Reports writer_uncollected when not.
    A plan (`apply` False) says what --apply would discard; nothing is discarded yet."""
    target = _target(state)
    if state.baseline is None or not host.storage_present(writer_of(paths, state), "clone"):
        return True  # never handed to a session, or no clone left: nothing to lose
    lost = "its clone, which could not be inspected"
    try:
        inspection = inspect_writer(paths, host, state, loaded.config.pool)
        reason = uncollected_reason(inspection, state)
        lost = discarded(inspection, state.baseline)
    except WriterpoolError as exc:
        reason = f"the clone could not be inspected ({exc.code})"
    if reason is None:
        return True
    if discard:
        done = "discarded as asked" if apply else "--apply will discard, as asked"
        report.add("writer_uncollected", "warning", target,
                   f"{reason}; {done}: {lost}", discarded=lost)  # fmt: skip
        return True
    report.add(
        "writer_uncollected",
        "error",
        target,
        f"{reason}; --discard would lose: {lost}",
        remedy=f"writerpool writer collect {state.name} --apply, or pass --discard",
        wouldDiscard=lost,
    )
    return False


def expected_baseline(loaded: LoadedConfig, state: WriterState, base: BaseRef) -> Baseline:
    tags = {}
    if state.tags == "reachable":
        tags = merged_tags(workspace_repo(loaded, state.alias), base.commit)
    return Baseline(
        head=f"refs/heads/{base.branch}",
        commit=base.commit,
        branches={base.branch: base.commit},
        tags=tags,
    )


def check_clone(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, state: WriterState
) -> str | None:
    """Why the clone is not exactly at state.baseline, or None: the same definition, by
    content, that the session guard applies."""
    problems = writer_problems(paths, host, state, loaded.config.pool)
    return "; ".join(problems)[:600] if problems else None


def recreate_clone(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    base: BaseRef,
    report: Report,
) -> WriterState:
    """Rebuild clone and agent directory from `base`; image and settings are kept."""
    target = _target(state)
    writer = writer_of(paths, state)
    repo = workspace_repo(loaded, state.alias)
    try:
        baseline = clone_on_host(paths, host, state, loaded.config.pool, repo, base, report)
        remove_path(writer.agent)
        clear_cache(paths, state, loaded.config.pool)
    except WriterpoolError as exc:
        report.add("writer_recreate_failed", "error", target, f"{exc.code}: {exc.message}")
        return state
    except OSError as exc:
        report.add("writer_recreate_failed", "error", target, f"the old clone: {exc.strerror}")
        return state
    crash_point("recreate.cloned")
    ensure_private_dir(writer.agent)
    state = save_state(
        writer.record,
        state.model_copy(
            update={"base": base_record(base), "baseline": baseline, "collection": None}
        ),
    )
    expected = expected_baseline(loaded, state, base)
    problem = None if baseline == expected else "the new clone is not at the base"
    try:
        problem = problem or check_clone(paths, host, loaded, state)
    except WriterpoolError as exc:
        problem = exc.message
    if problem is not None:
        report.add("writer_recreate_failed", "error", target, problem)
    else:
        report.add(
            "writer_recreated",
            "ok",
            target,
            f"clone and agent directory rebuilt on {base.name} at {base.commit[:12]}",
        )
    return state


def _run_reset(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    base: BaseRef,
    base_dir: Path,
) -> str:
    """Run the reset tool; the `.git` entries it removed, named (empty: none)."""
    repo = workspace_repo(loaded, state.alias)
    create_base_bundle(repo, base, state.tags == "reachable", base_dir / "base.bundle")
    spec = tool_spec(
        paths, host, state, loaded.config.pool, "reset", clone_rw=True, base_dir=base_dir
    )
    request = {
        "branch": base.branch,
        "commit": base.commit,
        "bundle_ref": f"refs/heads/{base.branch}",
        "tags": state.tags == "reachable",
    }
    answer = run_tool(host, spec, "reset", request, "writer_reset_failed")
    removed = [sanitize(str(n))[:200] for n in answer.get("removed", [])[:50]]
    count = int(answer.get("removed_count", len(removed)))
    more = f" and {count - len(removed)} more" if count > len(removed) else ""
    return ", ".join(removed) + more


def reset_clone(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    base: BaseRef,
    report: Report,
) -> WriterState:
    """Put the clone back on `base` in a throwaway container; recreate when that fails."""
    target = _target(state)
    base_dir = writer_of(paths, state).scratch("reset-base")
    shutil.rmtree(base_dir, ignore_errors=True)
    ensure_private_dir(base_dir)
    baseline = expected_baseline(loaded, state, base)
    candidate = state.model_copy(
        update={"base": base_record(base), "baseline": baseline, "collection": None}
    )
    removed = ""
    try:
        removed = _run_reset(paths, host, loaded, state, base, base_dir)
        clear_cache(paths, state, loaded.config.pool)
        crash_point("reset.tool_ran")
        problem = check_clone(paths, host, loaded, candidate)
    except WriterpoolError as exc:
        if exc.code == "writer_base_unavailable":
            raise
        problem = exc.message
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)
    if problem is None:
        crash_point("reset.verified")
        state = save_state(paths.writer_dir(state.name), candidate)
        report.add(
            "writer_reset",
            "ok",
            target,
            f"clone reset to {base.name} at {base.commit[:12]} and verified"
            + (f"; removed from .git (not work, no clone has them): {removed}" if removed else ""),
            **({"removedFromGitDir": removed} if removed else {}),
        )
        return state
    report.add(
        "writer_reset_failed",
        "warning",
        target,
        f"reset did not verify ({problem}); recreating the clone instead",
    )
    return recreate_clone(paths, host, loaded, state, base, report)


@dataclass(frozen=True)
class _Rebuild:
    command: str
    planned: str
    what: str
    base: Callable[[WriterRef, WriterState], BaseRef]
    act: Callable[[Paths, WriterHost, LoadedConfig, WriterState, BaseRef, Report], object]


def _back_to_base(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    name: str,
    discard: bool,
    apply: bool,
    how: _Rebuild,
) -> Report:
    """Reset and recreate alike: under lease and fence, refuse uncollected work, plan or act."""
    report = Report(f"writer {how.command}")
    ref = find_writer(paths, name)
    with (
        findings_for(report, ref.target),
        operate(paths, host, loaded.config.pool.lease_wait_seconds, name),
    ):
        state = ref.load()
        base = how.base(ref, state)
        if not guard(paths, host, loaded, state, discard, report, apply):
            return report
        if not apply:
            report.add(
                how.planned,
                "planned",
                ref.target,
                f"would {how.what} on {base.name} at {base.commit[:12]}",
            )
            return report
        how.act(paths, host, loaded, state, base, report)
    return report


def reset(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    name: str,
    base_name: str | None,
    discard: bool,
    apply: bool,
) -> Report:
    """`writer reset NAME [--base B] [--discard] [--apply]`."""

    def base(ref: WriterRef, state: WriterState) -> BaseRef:
        return resolve_base(workspace_repo(loaded, ref.alias), base_name or state.base.name)

    how = _Rebuild("reset", "writer_reset_planned", "reset the clone", base, reset_clone)
    return _back_to_base(paths, host, loaded, name, discard, apply, how)


def recreate(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, name: str, discard: bool, apply: bool
) -> Report:
    """`writer recreate NAME [--discard] [--apply]`: rebuild on the workspace base."""

    def base(ref: WriterRef, state: WriterState) -> BaseRef:
        return workspace_base(paths, loaded, ref.alias)

    how = _Rebuild(
        "recreate",
        "writer_recreate_planned",
        "rebuild clone and agent directory",
        base,
        recreate_clone,
    )
    return _back_to_base(paths, host, loaded, name, discard, apply, how)


def finish(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, name: str, apply: bool, step: Step = quiet
) -> Report:
    """`writer finish NAME [--apply]`: collect, then reset or recreate on the workspace base."""
    report = Report("writer finish")
    ref = find_writer(paths, name)
    with (
        findings_for(report, ref.target),
        operate(paths, host, loaded.config.pool.lease_wait_seconds, name),
    ):
        state = ref.load()
        base = workspace_base(paths, loaded, ref.alias)
        action = "recreate" if state.lifecycle == "ephemeral" else "reset"
        if not apply:
            outcome = plan_collect(paths, host, loaded, state, report)
            stop = outcome.status == "incomplete" or outcome.inspection.stash
            report.add(
                "writer_finish_planned",
                "planned",
                ref.target,
                f"would collect, then {action} on {base.name} at {base.commit[:12]}"
                + ("; it would stop after collecting (see above)" if stop else ""),
            )
            return report
        outcome = collect_writer(paths, host, loaded, state, report, step)
        if outcome.status == "incomplete":
            return report  # writer_collect_incomplete is reported; nothing is reset
        if outcome.inspection.stash:
            report.add(
                "writer_uncollected",
                "error",
                ref.target,
                f"a stash exists and is never collected; finish stopped before the {action}",
                remedy="drop or commit the stash inside the writer, or reset with --discard",
            )
            return report
        crash_point("finish.collected")
        state = ref.load()
        step(f"{action} on {base.name}")
        if action == "recreate":
            recreate_clone(paths, host, loaded, state, base, report)
        else:
            reset_clone(paths, host, loaded, state, base, report)
    return report


def _may_drop_stateless(paths: Paths, ref: WriterRef, discard: bool, report: Report) -> bool:
    """A writer without a state file: its clone's work cannot be judged, so it goes only
    with --discard (a directory with no clone holds nothing to lose)."""
    if not writer_at(paths, ref.name).clone.exists():
        return True
    status: Status = "warning" if discard else "error"
    report.add(
        "writer_state_missing",
        status,
        ref.target,
        "the writer has a clone but no usable state.json, so its work cannot be judged"
        + ("; discarded as asked" if discard else ""),
        remedy="copy what you need out of the clone first, then pass --discard",
    )
    return discard


def remove(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, name: str, discard: bool, apply: bool
) -> Report:
    """`writer remove NAME [--discard] [--apply]`: deletes everything the writer owns; a
    plan (with the same refusals) until --apply."""
    report = Report("writer remove")
    ref = find_writer(paths, name)
    with (
        findings_for(report, ref.target),
        operate(paths, host, loaded.config.pool.lease_wait_seconds, name),
    ):
        try:
            state = load_state(paths.writer_dir(name))
        except WriterpoolError as exc:
            if not discard:
                report.add(
                    "writer_uncollected",
                    "error",
                    ref.target,
                    f"the state cannot be read ({exc.code}), so uncollected work cannot "
                    "be ruled out",
                    remedy="pass --discard to remove it anyway",
                )
                return report
            state = None
        else:
            if state is None and not _may_drop_stateless(paths, ref, discard, report):
                return report
        if state is not None and not guard(paths, host, loaded, state, discard, report):
            return report
        if not apply:
            report.add("writer_remove_planned", "planned", ref.target, "would delete state, "
                       "clone, agent directory and bundles; refs already collected into the "
                       "checkout would stay")  # fmt: skip
            return report
        try:
            delete_writer_files(paths, host, name)
        except OSError as exc:
            report.add(
                "writer_remove_failed",
                "error",
                ref.target,
                f"removal stopped ({exc.strerror}); the state is kept, so running the same "
                "command again finishes it",
            )
            return report
        # Inside the block: a failure above is reported by findings_for and must not be
        # followed by a line saying the writer was removed.
        report.add(
            "writer_removed",
            "ok",
            ref.target,
            "state, clone, agent directory and bundles deleted; refs already collected "
            "into the checkout are kept",
        )
    return report
