"""Putting a writer's clone back on a base, under its lease and fence: reset runs git
only inside a throwaway container on the writer's host (the clone read-write, the base
bundle streamed to it), recreate clones it again from a streamed bundle; each result is
checked by the guard's own inspection, and a reset that does not verify is recreated.
"""

from __future__ import annotations

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef
from writerpool.gitops.bundle import merged_tags
from writerpool.pool.provision.make import base_record
from writerpool.pool.provision.stream import clone_on_host, stream_base
from writerpool.pool.provision.writer_ref import workspace_repo
from writerpool.pool.writer.baseline import writer_problems
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.inspect import cache_cleared, tool_answer, tool_spec
from writerpool.report import Report, sanitize
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import Baseline, WriterState, save_state


def _target(state: WriterState) -> str:
    return f"writer/{state.alias}/{state.name}"


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
    pool = loaded.config.pool
    # The agent directory (each session renders it again) and the cache are emptied on
    # the writer's host by the container that clones; a missing part is made first.
    clear = ("agent", *(("cache",) if cache_cleared(state, pool) else ()))
    try:
        host.create_storage(writer, cache=state.cache != "none", adopt=True)
        baseline = clone_on_host(paths, host, state, pool, repo, base, report, clear)
    except WriterpoolError as exc:
        report.add("writer_recreate_failed", "error", target, f"{exc.code}: {exc.message}")
        return state
    except OSError as exc:
        report.add("writer_recreate_failed", "error", target, f"the old clone: {exc.strerror}")
        return state
    crash_point("recreate.cloned")
    state = save_state(
        writer.record.path,
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
) -> str:
    """Run the reset tool, the base's bundle streamed to it as provisioning streams one;
    the `.git` entries it removed, named (empty: none)."""
    repo = workspace_repo(loaded, state.alias)
    pool = loaded.config.pool
    # The same container empties the cache there, when the baseline has it empty.
    storage = ("cache",) if cache_cleared(state, pool) else ()
    spec = tool_spec(paths, host, state, pool, "reset", clone_rw=True, storage=storage)
    request = {
        "branch": base.branch,
        "commit": base.commit,
        "bundle_ref": f"refs/heads/{base.branch}",
        "tags": state.tags == "reachable",
    }
    code = "writer_reset_failed"
    stdout, done = stream_base(paths, host, state, spec, "reset", request, repo, base, code)
    answer = tool_answer(stdout, done.stderr, done.returncode, code)
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
    baseline = expected_baseline(loaded, state, base)
    candidate = state.model_copy(
        update={"base": base_record(base), "baseline": baseline, "collection": None}
    )
    removed = ""
    try:
        removed = _run_reset(paths, host, loaded, state, base)
        crash_point("reset.tool_ran")
        problem = check_clone(paths, host, loaded, candidate)
    except WriterpoolError as exc:
        if exc.code == "writer_base_unavailable":
            raise
        problem = exc.message
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
