"""The live pool service's record (service.json, 0600, in the service's directory): its
pid, port, URL and Unix socket. The service writes it once it listens and removes it
when it ends (service/app.py); `service status`, `serve` (which relays to the service
while it runs) and `register --http` read it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from writerpool.config.paths import Paths
from writerpool.untrusted import DocumentRefused, loads_json


def record_file(paths: Paths) -> Path:
    return paths.service_dir / "service.json"


def running(paths: Paths) -> dict[str, Any] | None:
    """The live service's record (pid, port, url, socket), or None."""
    try:
        record = loads_json(record_file(paths).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, DocumentRefused):
        return None
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(pid, int) or pid <= 1:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a killed service left its record
    except PermissionError:
        return None
    return dict(record)
