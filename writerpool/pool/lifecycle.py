"""Reset, recreate, finish and remove a writer.

Each runs under the writer's lease and fence, and each refuses a writer whose work
no complete collection covers (`writer_uncollected`) unless the operator passes
--discard (finish takes no --discard: it collects first and stops when it cannot).
Reset runs git only inside a throwaway container; the host checks the result with
reads that execute nothing, and rebuilds the clone when the check fails.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef, default_base_name, resolve_base
from writerpool.gitops.bundle import create_base_bundle
from writerpool.gitops.clone_read import read_refs
from writerpool.gitops.verify import verify_clone
from writerpool.pool.collect import (
    WriterRef,
    collect_writer,
    find_writer,
    findings_for,
    plan_collect,
    workspace_repo,
)
from writerpool.pool.container import writer_layout
from writerpool.pool.inspect import at_baseline, inspect_writer, run_tool, tool_spec
from writerpool.pool.provision import base_record, make_clone
from writerpool.pool.work import uncollected_reason
from writerpool.pool.writers import delete_writer_files, operate
from writerpool.report import Report, Step, quiet
from writerpool.runtime.podman import Podman
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
    podman: Podman,
    loaded: LoadedConfig,
    state: WriterState,
    discard: bool,
    report: Report,
) -> bool:
    """May this destructive operation go ahead? Reports writer_uncollected when not."""
    target = _target(state)
    clone = writer_layout(paths, state.name)["clone"]
    if state.baseline is None or not clone.exists():
        return True  # never handed to a session, or no clone left: nothing to lose
    try:
        reason = uncollected_reason(inspect_writer(paths, podman, state, loaded.config.pool), state)
    except WriterpoolError as exc:
        reason = f"the clone could not be inspected ({exc.code})"
    if reason is None:
        return True
    if discard:
        report.add("writer_uncollected", "warning", target, f"{reason}; discarded as asked")
        return True
    report.add(
        "writer_uncollected",
        "error",
        target,
        reason,
        remedy=f"writerpool writer collect {state.name} --apply, or pass --discard",
    )
    return False


def expected_baseline(base: BaseRef) -> Baseline:
    return Baseline(
        head=f"refs/heads/{base.branch}", commit=base.commit, branches={base.branch: base.commit}
    )


def check_clone(
    paths: Paths, podman: Podman, loaded: LoadedConfig, state: WriterState
) -> str | None:
    """Why the clone is not exactly at state.baseline, or None (reads execute nothing)."""
    assert state.baseline is not None
    clone = writer_layout(paths, state.name)["clone"]
    problems = verify_clone(clone)
    if problems:
        return "unsafe clone: " + ", ".join(problems[:5])
    refs = read_refs(clone)
    want = state.baseline
    if (refs.head, refs.head_commit, refs.branches) != (want.head, want.commit, want.branches):
        return "the refs differ from the base"
    if refs.stash or (state.tags == "none" and refs.tags):
        return "a stash or tags remain"
    if not at_baseline(inspect_writer(paths, podman, state, loaded.config.pool), want):
        return "the working tree is not clean"
    return None


def make_removable(top: Path) -> None:
    """Let the owner delete everything below `top`: an agent may leave read-only
    directories. Only real directories are changed; links are never followed."""
    if not top.is_dir() or top.is_symlink():
        return
    for dirpath, dirnames, _files in os.walk(top):
        for name in dirnames:
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode) and mode & 0o700 != 0o700:
                path.chmod(mode | 0o700)


def recreate_clone(
    paths: Paths,
    podman: Podman,
    loaded: LoadedConfig,
    state: WriterState,
    base: BaseRef,
    report: Report,
) -> WriterState:
    """Rebuild clone and agent directory from `base`; image and settings are kept."""
    target = _target(state)
    lay = writer_layout(paths, state.name)
    repo = workspace_repo(loaded, state.alias)
    try:
        make_removable(lay["clone"])
        baseline = make_clone(
            paths, state.name, repo, base, state.tags == "reachable", report, target
        )
    except WriterpoolError as exc:
        report.add("writer_recreate_failed", "error", target, f"{exc.code}: {exc.message}")
        return state
    except OSError as exc:
        report.add("writer_recreate_failed", "error", target, f"the old clone: {exc.strerror}")
        return state
    crash_point("recreate.cloned")
    shutil.rmtree(lay["agent"], ignore_errors=True)
    ensure_private_dir(lay["agent"])
    state = save_state(
        lay["root"],
        state.model_copy(
            update={"base": base_record(base), "baseline": baseline, "collection": None}
        ),
    )
    problem = None if baseline == expected_baseline(base) else "the new clone is not at the base"
    try:
        problem = problem or check_clone(paths, podman, loaded, state)
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
    podman: Podman,
    loaded: LoadedConfig,
    state: WriterState,
    base: BaseRef,
    base_dir: Path,
) -> None:
    repo = workspace_repo(loaded, state.alias)
    create_base_bundle(repo, base, state.tags == "reachable", base_dir / "base.bundle")
    spec = tool_spec(paths, state, loaded.config.pool, "reset", clone_rw=True, base_dir=base_dir)
    request = {
        "branch": base.branch,
        "commit": base.commit,
        "bundle_ref": f"refs/heads/{base.branch}",
        "tags": state.tags == "reachable",
    }
    run_tool(podman, spec, "reset", request, "writer_reset_failed")


def reset_clone(
    paths: Paths,
    podman: Podman,
    loaded: LoadedConfig,
    state: WriterState,
    base: BaseRef,
    report: Report,
) -> WriterState:
    """Put the clone back on `base` in a throwaway container; recreate when that fails."""
    target = _target(state)
    base_dir = writer_layout(paths, state.name)["root"] / "reset-base"
    shutil.rmtree(base_dir, ignore_errors=True)
    ensure_private_dir(base_dir)
    candidate = state.model_copy(
        update={"base": base_record(base), "baseline": expected_baseline(base), "collection": None}
    )
    try:
        _run_reset(paths, podman, loaded, state, base, base_dir)
        crash_point("reset.tool_ran")
        problem = check_clone(paths, podman, loaded, candidate)
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
            f"clone reset to {base.name} at {base.commit[:12]} and verified",
        )
        return state
    report.add(
        "writer_reset_failed",
        "warning",
        target,
        f"reset did not verify ({problem}); recreating the clone instead",
    )
    return recreate_clone(paths, podman, loaded, state, base, report)


@dataclass(frozen=True)
class _Rebuild:
    command: str
    planned: str
    what: str
    base: Callable[[WriterRef, WriterState], BaseRef]
    act: Callable[[Paths, Podman, LoadedConfig, WriterState, BaseRef, Report], object]


def _back_to_base(
    paths: Paths,
    podman: Podman,
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
        operate(paths, podman, loaded.config.pool.lease_wait_seconds, name),
    ):
        state = ref.load()
        base = how.base(ref, state)
        if not guard(paths, podman, loaded, state, discard, report):
            return report
        if not apply:
            report.add(
                how.planned,
                "planned",
                ref.target,
                f"would {how.what} on {base.name} at {base.commit[:12]}",
            )
            return report
        how.act(paths, podman, loaded, state, base, report)
    return report


def reset(
    paths: Paths,
    podman: Podman,
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
    return _back_to_base(paths, podman, loaded, name, discard, apply, how)


def recreate(
    paths: Paths, podman: Podman, loaded: LoadedConfig, name: str, discard: bool, apply: bool
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
    return _back_to_base(paths, podman, loaded, name, discard, apply, how)


def finish(
    paths: Paths, podman: Podman, loaded: LoadedConfig, name: str, apply: bool, step: Step = quiet
) -> Report:
    """`writer finish NAME [--apply]`: collect, then reset or recreate on the workspace base."""
    report = Report("writer finish")
    ref = find_writer(paths, name)
    with (
        findings_for(report, ref.target),
        operate(paths, podman, loaded.config.pool.lease_wait_seconds, name),
    ):
        state = ref.load()
        base = workspace_base(paths, loaded, ref.alias)
        action = "recreate" if state.lifecycle == "ephemeral" else "reset"
        if not apply:
            outcome = plan_collect(paths, podman, loaded, state, report)
            stop = outcome.status == "incomplete" or outcome.inspection.stash
            report.add(
                "writer_finish_planned",
                "planned",
                ref.target,
                f"would collect, then {action} on {base.name} at {base.commit[:12]}"
                + ("; it would stop after collecting (see above)" if stop else ""),
            )
            return report
        outcome = collect_writer(paths, podman, loaded, state, report, step)
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
            recreate_clone(paths, podman, loaded, state, base, report)
        else:
            reset_clone(paths, podman, loaded, state, base, report)
    return report


def remove(paths: Paths, podman: Podman, loaded: LoadedConfig, name: str, discard: bool) -> Report:
    """`writer remove NAME [--discard]`: no planning; deletes everything the writer owns."""
    report = Report("writer remove")
    ref = find_writer(paths, name)
    with (
        findings_for(report, ref.target),
        operate(paths, podman, loaded.config.pool.lease_wait_seconds, name),
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
        if state is not None and not guard(paths, podman, loaded, state, discard, report):
            return report
        delete_writer_files(paths, name)
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
