"""The pool's doctor checks: the isolation control record and each writer's readiness.

`writerpool doctor` runs them after doctor's own (doctor never imports the pool); the
provisioning gate does not: it checks the host and the workspace it provisions."""

from __future__ import annotations

from writerpool.doctor.model import Check, CheckContext, CheckResult
from writerpool.errors import WriterpoolError
from writerpool.pool.control import control_current, load_control
from writerpool.pool.listing import writer_names
from writerpool.pool.status import status_of
from writerpool.runtime.hosts import open_host
from writerpool.state.writer import load_state


def isolation_control(ctx: CheckContext) -> list[CheckResult]:
    record = load_control(ctx.paths)
    if control_current(ctx.paths):
        return [CheckResult("isolation_control", "ok", "control", "a passing control is recorded")]
    if record is None:
        message = "no isolation control has been run"
    elif not record.passed:
        message = "the last isolation control failed"
    else:
        message = "the control was recorded with another harness"
    return [
        CheckResult(
            "isolation_control",
            "warning",
            "control",
            message,
            remedy="run `writerpool control --apply`",
        )
    ]


def writer_readiness(ctx: CheckContext) -> list[CheckResult]:
    if ctx.loaded is None:
        return []
    results = []
    host = open_host()
    for alias, name in writer_names(ctx.paths):
        subject = f"writer/{alias}/{name}"
        try:
            state = load_state(ctx.paths.writer_dir(name))
        except WriterpoolError as exc:
            results.append(
                CheckResult(
                    "writer_readiness",
                    "error",
                    subject,
                    exc.message,
                    remedy=f"`writerpool writer remove {name} --apply` after collecting",
                )
            )
            continue
        if state is None:
            continue
        # The words of `writer status` (the session guard's verdict), not a second set.
        status = status_of(ctx.paths, host, ctx.loaded, state)
        if status.leasable:
            results.append(CheckResult("writer_readiness", "ok", subject, status.text()))
        else:
            results.append(
                CheckResult(
                    "writer_readiness",
                    "warning",
                    subject,
                    f"{status.text()} ({status.code})",
                    remedy=status.next or "wait for the session or command holding it to end",
                )
            )
    return results


POOL_CHECKS: tuple[Check, ...] = (isolation_control, writer_readiness)
