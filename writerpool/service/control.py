"""Start, stop and report on the user's service process."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Literal

from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.proc import start_daemon
from writerpool.report import Report
from writerpool.service import port as ports
from writerpool.state.service_record import failure_file, recorded_port, running
from writerpool.untrusted import DocumentRefused, loads_json

# How long `start` waits for the new process to record its address, and `stop` for it to end.
START_SECONDS = 30.0
STOP_SECONDS = 60.0
POLL_SECONDS = 0.1


def _view(report: Report, record: dict[str, Any]) -> Report:
    report.data.update({"running": True, "url": record["url"], "pid": record["pid"],
                        "port": record["port"], "socket": record["socket"]})  # fmt: skip
    report.add("service_running", "ok", "service", f"serving {record['url']} (pid {record['pid']})")
    return report


def start(paths: Paths, port: int | None = None) -> Report:
    """Start the service unless it runs. `port`: listen there from now on (0: any free
    port), instead of the configured or recorded one."""
    report = Report("service start")
    record = running(paths)
    if record is not None:
        if port is not None and port != record["port"]:
            raise UsageError(f"the service runs on port {record['port']}; stop it first")
        return _view(report, record)
    configured = load_config(paths).config.service.port
    if port is not None and configured and port != configured:
        raise UsageError(f"config.toml sets [service] port = {configured}; change it there")
    wanted = port if port is not None else configured or recorded_port(paths)
    if wanted and not ports.bindable(wanted):
        return port_taken(report, wanted, "error", configured=bool(configured))
    return _spawn(paths, report, port, wanted or 0, bool(configured))


def _spawn(paths: Paths, report: Report, port: int | None, wanted: int, configured: bool) -> Report:
    argv = [sys.executable, "-m", "writerpool", "service", "run"]
    if port is not None:
        argv += ["--port", str(port)]
    # The user's own environment: it holds the providers' keys (api_key_env), as a
    # client's environment does for `serve`.
    env = {**os.environ, "WRITERPOOL_CONFIG": str(paths.config_file)}
    failure_file(paths).unlink(missing_ok=True)
    start_daemon(argv, env=env)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:  # bounded by START_SECONDS
        record = running(paths)
        if record is not None:
            return _view(report, record)
        failed = _failure(paths)
        if failed is not None:
            code, message = failed
            if code == "service_port_taken" and wanted:
                # Taken between the check above and the bind (a race with its holder).
                return port_taken(report, wanted, "error", configured)
            raise WriterpoolError(code, message)
        time.sleep(POLL_SECONDS)
    raise WriterpoolError(
        "service_start_failed", "the service did not come up; `writerpool service run` shows why"
    )


def _failure(paths: Paths) -> tuple[str, str] | None:
    try:
        record = loads_json(failure_file(paths).read_bytes())
    except (OSError, ValueError, DocumentRefused):
        return None
    code = record.get("code") if isinstance(record, dict) else None
    message = record.get("message") if isinstance(record, dict) else None
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    try:
        WriterpoolError(code, message)
    except ValueError:
        return "service_start_failed", "the service could not start"
    return code, message


def port_taken(
    report: Report, port: int, status: Literal["error", "warning"], configured: bool = False
) -> Report:
    """The finding for a port someone else holds: who, and what to do."""
    who, uids = ports.describe(port)
    if configured:
        remedy = (
            "free the port (stop what listens there), or set another [service] port in "
            "config.toml and register the HTTP clients again"
        )
    else:
        remedy = (
            "free the port (stop what listens there), or `writerpool service start --port N` "
            "(0: any free port), which registers writerpool's HTTP clients again at the new URL"
        )
    report.add(
        "service_port_taken", status, "service",
        f"127.0.0.1:{port}, where the clients registered over HTTP reach the service, is "
        f"held by {who}; the service does not move to another port, which would leave "
        "those clients sending their requests to that holder",
        remedy=remedy, port=port, uids=uids,
    )  # fmt: skip
    return report


def stop(paths: Paths) -> Report:
    report = Report("service stop")
    record = running(paths)
    if record is None:
        report.data["running"] = False
        report.add("service_stopped", "ok", "service", "the service is not running")
        return report
    pid = int(record["pid"])
    os.kill(pid, signal.SIGTERM)  # it closes every session first, as `serve` does
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline and running(paths) is not None:  # bounded
        time.sleep(POLL_SECONDS)
    if running(paths) is not None:
        raise WriterpoolError("service_stop_failed", "the service did not end in time")
    report.data["running"] = False
    report.add("service_stopped", "ok", "service", f"stopped the service (pid {pid})")
    return report


def status(paths: Paths) -> Report:
    report = Report("service status")
    record = running(paths)
    if record is None:
        report.data["running"] = False
        report.add("service_stopped", "warning", "service", "the service is not running",
                   remedy="writerpool service start")  # fmt: skip
        return report
    return _view(report, record)
