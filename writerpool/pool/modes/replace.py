"""`mode set` replaces writers made with other provisioning settings.

Image, network, tags and cache are fixed when a writer is provisioned. A writer that
holds nothing (no work, by the same judgement as reset without --discard: leftovers are
not work) is removed under its lease, then provisioned on the new settings and accepted
in the same run. A writer that holds work keeps its old settings and takes no session;
the report names it with the commands that move it. Nothing is lost either way.
"""

from __future__ import annotations

from writerpool.config.modes import ModeEntry
from writerpool.errors import WriterpoolError
from writerpool.pool.modes.plan import provisioning_differences
from writerpool.pool.modes.show import reproduce
from writerpool.pool.provision.make import writer_name
from writerpool.pool.provision.reconcile import (
    PoolContext,
    delete_writer_files,
    mark_settings_changed,
    operate,
    provision_one,
)
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.inspect import inspect_writer
from writerpool.pool.writer.work import work_digest
from writerpool.state.writer import WriterState, load_state


def holds_nothing(ctx: PoolContext, state: WriterState) -> bool:
    """True when removing the writer loses nothing: no work and no stash. Raises
    (writer_inspect_failed, ...) when the clone cannot be inspected: callers fail closed."""
    host = ctx.host_of(state.name)
    if state.baseline is None or not host.storage_present(writer_of(ctx.paths, state), "clone"):
        return True
    inspection = inspect_writer(ctx.paths, host, state, ctx.loaded.config.pool)
    return not inspection.stash and work_digest(inspection, state.baseline) is None


def _changed(ctx: PoolContext, state: WriterState) -> str:
    return "; ".join(provisioning_differences(state, ctx.settings)) or "provisioning settings"


def _report_kept(ctx: PoolContext, state: WriterState, planned: bool) -> None:
    command = reproduce(ctx.alias, ModeEntry(mode="container", container=ctx.settings))
    verb = "would keep" if planned else "keeps"
    ctx.report.add(
        "writer_settings_changed",
        "warning",
        f"writer/{ctx.alias}/{state.name}",
        f"holds work, so it {verb} its old settings ({_changed(ctx, state)}) and takes no "
        "session until it is replaced",
        remedy=f"writerpool writer finish {state.name} --apply (collects, then resets), "
        f"then `{command} --apply` replaces it",
        settings=provisioning_differences(state, ctx.settings),
    )


def plan_replacement(ctx: PoolContext, state: WriterState) -> bool:
    """Report what mode set does to a writer made with other settings; False when its
    clone cannot be judged (the run must stop)."""
    target = f"writer/{ctx.alias}/{state.name}"
    try:
        idle = holds_nothing(ctx, state)
    except WriterpoolError as exc:
        ctx.report.add(
            "writer_settings_changed", "error", target,
            f"provisioned with other settings ({_changed(ctx, state)}), and its clone could "
            f"not be inspected ({exc.code}), so it is neither replaced nor kept",
            remedy=f"writerpool writer status {state.name}",
        )  # fmt: skip
        return False
    if not idle:
        _report_kept(ctx, state, planned=not ctx.apply)
    elif not ctx.apply:
        ctx.report.add(
            "writer_replace_planned", "planned", target,
            f"holds nothing: would be removed, provisioned on the new settings "
            f"({_changed(ctx, state)}) and accepted",
        )  # fmt: skip
    return True


def replace_writer(ctx: PoolContext, index: int) -> None:
    """Remove a writer that holds nothing (judged again under its lease) and provision
    it on the new settings; one that holds work is marked and named instead."""
    name = writer_name(ctx.alias, index)
    target = f"writer/{ctx.alias}/{name}"
    try:
        host = ctx.host_of(name)
        with operate(ctx.paths, host, ctx.loaded.config.pool.lease_wait_seconds, name, ctx.leases):
            state = load_state(ctx.paths.writer_dir(name))
            if state is None:
                return
            if not holds_nothing(ctx, state):
                mark_settings_changed(ctx, index)
                return
            changed = _changed(ctx, state)
            ctx.step(f"{name}: holds nothing; removing it to provision it on the new settings")
            delete_writer_files(ctx.paths, host, name)
    except WriterpoolError as exc:
        ctx.report.add(exc.code, "error", target, exc.message)
        return
    ctx.report.add("writer_replaced", "ok", target, f"held nothing; replaced ({changed})")
    provision_one(ctx, index)
