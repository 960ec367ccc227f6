"""The pool service's doctor check: its port held by another program while it is down.

`writerpool doctor` runs it after doctor's own (doctor never imports the service), with
the same finding `service start` refuses with (control.port_taken)."""

from __future__ import annotations

from writerpool.doctor.model import CheckContext, CheckResult
from writerpool.report import Report
from writerpool.service.control import port_taken
from writerpool.service.port import holders
from writerpool.state.service_record import recorded_port, running


def service_port(ctx: CheckContext) -> list[CheckResult]:
    """While the service is down, whether anything listens on the port its HTTP clients
    are registered with: that holder would receive their next requests (writerpool's
    header helper withholds the token then), and `service start` would refuse."""
    if running(ctx.paths) is not None:
        return []
    configured = ctx.loaded.config.service.port if ctx.loaded is not None else 0
    port = configured or recorded_port(ctx.paths)
    if not port or not holders(port):
        return []
    found = port_taken(Report("doctor"), port, "warning", bool(configured)).findings[0]
    return [
        CheckResult(found.code, "warning", "service",
                    found.message + " (the service is not running)", found.remedy, data=found.data)
    ]  # fmt: skip
