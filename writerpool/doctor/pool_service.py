"""The pool service's settings: an invalid change it refused (it keeps the last good ones)."""

from __future__ import annotations

import json

from writerpool.doctor.model import CheckContext, CheckResult


def service_settings(ctx: CheckContext) -> list[CheckResult]:
    """Reported only while a refused change is recorded: the service runs on the last
    valid settings, not on the files as they are."""
    try:
        record = json.loads(ctx.paths.settings_refused_file.read_bytes())
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
