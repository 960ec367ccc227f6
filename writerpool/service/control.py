"""Start, stop and report on the user's service process."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.proc import start_daemon
from writerpool.report import Report
from writerpool.state.service_record import running

# How long `start` waits for the new process to record its address, and `stop` for it to end.
START_SECONDS = 30.0
STOP_SECONDS = 60.0
POLL_SECONDS = 0.1


def _view(report: Report, record: dict[str, Any]) -> Report:
    report.data.update({"running": True, "url": record["url"], "pid": record["pid"],
                        "port": record["port"], "socket": record["socket"]})  # fmt: skip
    report.add("service_running", "ok", "service", f"serving {record['url']} (pid {record['pid']})")
    return report


def start(paths: Paths) -> Report:
    report = Report("service start")
    record = running(paths)
    if record is not None:
        return _view(report, record)
    argv = [sys.executable, "-m", "writerpool", "service", "run"]
    # The user's own environment: it holds the providers' keys (api_key_env), as a
    # client's environment does for `serve`.
    env = {**os.environ, "WRITERPOOL_CONFIG": str(paths.config_file)}
    start_daemon(argv, env=env)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:  # bounded by START_SECONDS
        record = running(paths)
        if record is not None:
            return _view(report, record)
        time.sleep(POLL_SECONDS)
    raise WriterpoolError(
        "service_start_failed", "the service did not come up; `writerpool service run` shows why"
    )


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
