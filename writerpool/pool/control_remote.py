"""The isolation control on a host over SSH (`writerpool control --host NAME`): the
harness, run uncontained as the host's SSH user, must see the planted escapes there.

Each host has its own record (pool/control.py control_file). The canary lives in that
user's home on the host (pool/probes.py); the allowlist checks go
through the control's open relay, forwarded to the host for this run only; the host's
loopback listener is opened by the same process that runs the harness there.
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from pathlib import Path

from writerpool.config.paths import Paths
from writerpool.pool.control import (
    EXPECTED_ESCAPES,
    EXPECTED_NETWORK_ESCAPES,
    ControlRecord,
    harness_digest,
    harness_path,
    host_listener,
    open_relay,
    save_control,
)
from writerpool.pool.harness_report import parse_harness_report
from writerpool.pool.probes import held_directory, planted_canary
from writerpool.pool.remote_image import configured_host
from writerpool.report import Report
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.state.writer import now

# Runs on the host: a loopback listener an uncontained process can reach, then the
# harness read from stdin, as a script.
BOOT = (
    "import os, socket, sys\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(8)\n"
    "os.environ['WRITERPOOL_HARNESS_HOST_PORT'] = str(s.getsockname()[1])\n"
    "code = sys.stdin.read(); sys.argv = ['harness']\n"
    "exec(compile(code, 'harness', 'exec'), {'__name__': '__main__'})\n"
)


def _run_harness(remote: RemotePodman, token: str) -> bytes:
    ssh = remote.host
    with contextlib.ExitStack() as stack:
        canary = stack.enter_context(planted_canary(ssh))
        work = stack.enter_context(
            held_directory(ssh, "/tmp", f"writerpool-control-{token}", canary=False)
        )
        local = stack.enter_context(tempfile.TemporaryDirectory(prefix="writerpool-control-"))
        port = stack.enter_context(host_listener())
        relay = stack.enter_context(open_relay(Path(local) / ".relay", port))
        relay_there = stack.enter_context(remote.session_socket(relay, f"control-{token}"))
        env = {
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_WORK": work,
            "WRITERPOOL_HARNESS_CANARY": "scan",
            "WRITERPOOL_CONNECT_SOCKET": str(relay_there),
            "WRITERPOOL_HARNESS_ALLOW_PORT": str(port),
            "WRITERPOOL_CONTROL_CREDENTIAL": "wp" + "canary-" + secrets.token_hex(16),
        }
        words = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), "python3", "-c", BOOT]
        done = ssh.exec(["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", work, *words],
                        timeout=90, input=harness_path().read_bytes())  # fmt: skip
        return done.stdout


def run_host_control(paths: Paths, name: str, apply: bool) -> Report:
    host = configured_host(paths, name)
    report = Report("control", data={"host": name})
    target = f"host/{name}/control"
    if not apply:
        report.add("isolation_control_planned", "planned", target,
                   f"would plant a canary in the SSH user's home on {name}, run the harness "
                   "there uncontained, and remove the canary")  # fmt: skip
        return report
    with connect(name, host) as remote:
        parsed = parse_harness_report(_run_harness(remote, secrets.token_hex(6)))
    missed = tuple(n for n in (*EXPECTED_ESCAPES, *EXPECTED_NETWORK_ESCAPES)
                   if parsed is None or parsed.status_of(n) != "fail")  # fmt: skip
    if parsed is not None and parsed.network != "not_limited":
        missed += ("network",)
    passed = parsed is not None and not missed
    record = ControlRecord(passed=passed, at=now(), harness_digest=harness_digest(), missed=missed)
    save_control(paths, record, name)
    if passed:
        report.add("isolation_control_passed", "ok", target,
                   f"the uncontained harness on {name} detected every expected escape; "
                   "canary removed")  # fmt: skip
    else:
        report.add("isolation_control_failed", "error", target,
                   "the harness did not detect: " + (", ".join(missed) or "(no valid report)"),
                   remedy=f"the harness cannot be trusted on {name}; no writer there can be "
                   "accepted (is python3 installed for the SSH user?)",
                   missed=list(missed))  # fmt: skip
    return report
