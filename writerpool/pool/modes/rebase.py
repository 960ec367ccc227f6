"""A new workspace base takes effect: `mode set --base B --apply` moves each kept writer
that is exactly at its baseline onto B (reset, or recreate for an ephemeral writer).
A writer that holds anything stays where it is and is named with the command to run.
"""

from __future__ import annotations

from writerpool.errors import WriterpoolError
from writerpool.pool.provision.make import existing_states
from writerpool.pool.provision.rebuild import recreate_clone, reset_clone
from writerpool.pool.provision.reconcile import PoolContext, operate
from writerpool.pool.writer.baseline import writer_problems
from writerpool.pool.writer.lease import Lease
from writerpool.state.writer import WriterState, load_state


def _movers(ctx: PoolContext) -> list[WriterState]:
    assert ctx.base is not None
    states = existing_states(ctx.paths, ctx.alias)
    return [
        s for i, s in sorted(states.items())
        if s is not None and i <= ctx.settings.writers and s.baseline is not None
        and s.base.name != ctx.base.name
    ]  # fmt: skip


def _kept(ctx: PoolContext, state: WriterState, problems: list[str]) -> None:
    assert ctx.base is not None
    ctx.report.add(
        "writer_base_kept",
        "warning",
        f"writer/{ctx.alias}/{state.name}",
        f"stays on {state.base.name}: it is not at its baseline ("
        + "; ".join(problems)[:200]
        + ")",
        remedy=f"writerpool writer finish {state.name} --apply (collects, then moves it to "
        f"{ctx.base.name}), or writerpool writer reset {state.name} --base {ctx.base.name} "
        "--apply --discard",
    )


def _probe(ctx: PoolContext, state: WriterState) -> list[str] | None:
    """Why the writer is not at its baseline; None when a session or command holds it."""
    lease = Lease(ctx.paths.writer_dir(state.name))
    try:
        lease.acquire(wait=0, judging=True)
    except WriterpoolError:
        return None
    lease.release()
    try:
        return writer_problems(ctx.paths, ctx.host_of(state.name), state, ctx.loaded.config.pool)
    except WriterpoolError as exc:
        return [f"the clone could not be inspected ({exc.code})"]


def plan_base_moves(ctx: PoolContext) -> None:
    assert ctx.base is not None
    for state in _movers(ctx):
        target = f"writer/{ctx.alias}/{state.name}"
        problems = _probe(ctx, state)
        if problems is None:
            ctx.report.add("writer_base_move_planned", "planned", target,
                           f"in use; would move from {state.base.name} to {ctx.base.name} "
                           "if it is at its baseline when applied")  # fmt: skip
        elif problems:
            _kept(ctx, state, problems)
        else:
            ctx.report.add("writer_base_move_planned", "planned", target,
                           f"at baseline: would move from {state.base.name} to "
                           f"{ctx.base.name} at {ctx.base.commit[:12]}")  # fmt: skip


def move_to_base(ctx: PoolContext) -> None:
    """Under each writer's lease: at baseline, reset (or recreate) onto the new base."""
    assert ctx.base is not None
    pool = ctx.loaded.config.pool
    for candidate in _movers(ctx):
        name = candidate.name
        try:
            host = ctx.host_of(name)
            with operate(ctx.paths, host, pool.lease_wait_seconds, name, ctx.leases):
                state = load_state(ctx.paths.writer_dir(name)) or candidate
                problems = writer_problems(ctx.paths, host, state, pool)
                if problems:
                    _kept(ctx, state, problems)
                    continue
                ctx.step(f"{name}: moving from {state.base.name} to {ctx.base.name}")
                act = recreate_clone if state.lifecycle == "ephemeral" else reset_clone
                act(ctx.paths, host, ctx.loaded, state, ctx.base, ctx.report)
        except WriterpoolError as exc:
            ctx.report.add(exc.code, "error", f"writer/{ctx.alias}/{name}", exc.message)
