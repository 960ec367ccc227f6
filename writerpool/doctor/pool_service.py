"""The pool service: an invalid settings change it refused (it keeps the last good ones),
and its port held by another program while it is down."""

from __future__ import annotations

import json

from writerpool.doctor.model import CheckContext, CheckResult
from writerpool.report import Report
from writerpool.service import control
from writerpool.service.app import recorded_port
from writerpool.service.port import holders
from writerpool.sessions.reload import refused_file


def service_settings(ctx: CheckContext) -> list[CheckResult]:
    """Reported only while a refused change is recorded: the service runs on the last
    valid settings, not on the files as they are."""
    try:
        record = json.loads(refused_file(ctx.paths).read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        record = {}
    code = record.get("code") if isinstance(record, dict) else None
    message = record.get("message") if isinstance(record, dict) else None
    return [
        CheckResult(
            "service_settings", "error", "service",
            f"the service refused a settings change ({code}: {message}); it runs on the last "
            "valid configuration and modes",
            "fix the file (see `writerpool config check`): the service loads it on its next call",
        )
    ]  # fmt: skip


def service_port(ctx: CheckContext) -> list[CheckResult]:
    """While the service is down, whether anything listens on the port its HTTP clients
    are registered with: that holder would receive their next requests (writerpool's
    header helper withholds the token then), and `service start` would refuse."""
    if control.running(ctx.paths) is not None:
        return []
    configured = ctx.loaded.config.service.port if ctx.loaded is not None else 0
    port = configured or recorded_port(ctx.paths)
    if not port or not holders(port):
        return []
    found = control.port_taken(Report("doctor"), port, "warning", bool(configured)).findings[0]
    return [
        CheckResult(found.code, "warning", "service",
                    found.message + " (the service is not running)", found.remedy, data=found.data)
    ]  # fmt: skip
