"""Where the pool service listens, as its files say: the live service's record
(service.json, 0600, in the service's directory: its pid, port, URL and Unix socket),
the port it chose before (`port`), and why its last start failed (start-failure.json).
The service writes them (service/app.py); `service start` and `status`, `serve` (which
relays to the service while it runs), `register --http` and doctor read them.

Claude Code and Codex reach the service at `url_of(port)`; the port stays the same
from one start to the next, since the clients registered over HTTP name it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.proc import is_recorded_process
from writerpool.untrusted import DocumentRefused, loads_json

# The one path the service serves MCP on (its Guard answers 404 to any other).
ENDPOINT = "/mcp"


def url_of(port: int) -> str:
    return f"http://127.0.0.1:{port}{ENDPOINT}"


def record_file(paths: Paths) -> Path:
    return paths.service_dir / "service.json"


def port_file(paths: Paths) -> Path:
    return paths.service_dir / "port"


def failure_file(paths: Paths) -> Path:
    """Why the last `service run` could not start (`service start` reports it)."""
    return paths.service_dir / "start-failure.json"


def running(paths: Paths) -> dict[str, Any] | None:
    """The live service's record (pid, port, url, socket), or None."""
    try:
        record = loads_json(record_file(paths).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, DocumentRefused):
        return None
    if not isinstance(record, dict) or not is_recorded_process(record):
        return None  # a killed service left its record (its pid may be another's now)
    return dict(record)


def recorded_port(paths: Paths) -> int | None:
    """The port chosen before (the registered clients' URLs name it), if any."""
    try:
        chosen = int(port_file(paths).read_text())
    except (OSError, ValueError):
        return None
    return chosen if 0 < chosen < 65536 else None


def expected_port(paths: Paths) -> int | None:
    """The port the service listens on, or will at its next start (None: not chosen yet)."""
    record = running(paths)
    if record is not None:
        return int(record["port"])
    return load_config(paths).config.service.port or recorded_port(paths)


def expected_url(paths: Paths) -> str | None:
    port = expected_port(paths)
    return url_of(port) if port else None
