"""Reset, recreate, finish and remove a writer.

Each runs under the writer's lease and fence, and each refuses a writer whose work
no complete collection covers (`writer_uncollected`) unless the operator passes
--discard (finish takes no --discard: it collects first and stops when it cannot).
Reset runs git only inside a throwaway container; the host checks the result with
reads that execute nothing, and rebuilds the clone when the check fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef, default_base_name, resolve_base
from writerpool.pool.collect.export import collect_writer, plan_collect
from writerpool.pool.provision.rebuild import recreate_clone, reset_clone
from writerpool.pool.provision.reconcile import delete_writer_files, operate
from writerpool.pool.provision.writer_ref import (
    WriterRef,
    find_writer,
    findings_for,
    workspace_repo,
)
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.inspect import inspect_writer
from writerpool.pool.writer.work import discarded, uncollected_reason
from writerpool.report import Report, Status, Step, quiet
from writerpool.runtime.host import WriterHost, writer_at
from writerpool.state.writer import WriterState, load_state


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


def _may_drop_stateless(
    paths: Paths, host: WriterHost, ref: WriterRef, discard: bool, report: Report
) -> bool:
    """A writer without a state file: its clone's work cannot be judged, so it goes only
    with --discard (a writer whose host keeps no clone holds nothing to lose)."""
    if not host.storage_present(writer_at(paths, ref.name, host.name), "clone"):
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
            if state is None and not _may_drop_stateless(paths, host, ref, discard, report):
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
