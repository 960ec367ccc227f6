"""The pool's doctor checks: the isolation control record and each writer's readiness.

`writerpool doctor` runs them after doctor's own (doctor never imports the pool); the
provisioning gate does not: it checks the host and the workspace it provisions."""

from __future__ import annotations

from writerpool.doctor.model import Check, CheckContext, CheckResult
from writerpool.errors import WriterpoolError
from writerpool.pool.acceptance.control import (
    control_command,
    control_current,
    control_subject,
    load_control,
)
from writerpool.pool.provision.listing import writer_names
from writerpool.pool.status.writers import status_on
from writerpool.runtime.host import LOCAL
from writerpool.runtime.hosts import WriterHosts
from writerpool.state.writer import load_state


def isolation_control(ctx: CheckContext) -> list[CheckResult]:
    """This machine's record, and each configured host's: a host's writers are accepted
    only against a control run there."""
    hosts = sorted(ctx.loaded.config.hosts) if ctx.loaded is not None else []
    return [_control_result(ctx, host) for host in (LOCAL, *hosts)]  # bounded: [hosts.*]


def _control_result(ctx: CheckContext, host: str) -> CheckResult:
    subject = control_subject(host)
    record = load_control(ctx.paths, host)
    if control_current(ctx.paths, host):
        return CheckResult("isolation_control", "ok", subject, "a passing control is recorded")
    if record is None:
        message = "no isolation control has been run"
    elif not record.passed:
        message = "the last isolation control failed"
    else:
        message = "the control was recorded with another harness"
    return CheckResult("isolation_control", "warning", subject, message,
                       remedy=f"run `{control_command(host)}`")  # fmt: skip


def writer_readiness(ctx: CheckContext) -> list[CheckResult]:
    if ctx.loaded is None:
        return []
    results = []
    with WriterHosts(ctx.loaded.config.hosts) as hosts:  # each host connected once
        for alias, name in writer_names(ctx.paths):  # bounded by the writers' records
            subject = f"writer/{alias}/{name}"
            try:
                state = load_state(ctx.paths.writer_dir(name))
            except WriterpoolError as exc:
                results.append(CheckResult("writer_readiness", "error", subject, exc.message,
                                           remedy=f"`writerpool writer remove {name} --apply` "
                                           "after collecting"))  # fmt: skip
                continue
            if state is None:
                continue
            # The words of `writer status` (the session guard's verdict), not a second set.
            status = status_on(ctx.paths, hosts, ctx.loaded, state)
            if status.leasable:
                results.append(CheckResult("writer_readiness", "ok", subject, status.text()))
            else:
                results.append(CheckResult(
                    "writer_readiness", "warning", subject, f"{status.text()} ({status.code})",
                    remedy=status.next or "wait for the session or command holding it to end",
                ))  # fmt: skip
    return results


POOL_CHECKS: tuple[Check, ...] = (isolation_control, writer_readiness)
