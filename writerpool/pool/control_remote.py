"""The isolation control on a host over SSH (`writerpool control --host NAME`): the
harness, run uncontained as the host's SSH user, must see the planted escapes there.

Each host has its own record (`isolation-control-hosts/NAME.json` in the state
directory). The canary lives in that user's home on the host; the allowlist checks go
through the control's open relay, forwarded to the host for this run only; the host's
loopback listener is opened by the same process that runs the harness there.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import tempfile
from pathlib import Path

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.control import (
    EXPECTED_ESCAPES,
    EXPECTED_NETWORK_ESCAPES,
    ControlRecord,
    harness_digest,
    harness_path,
    host_listener,
    open_relay,
)
from writerpool.pool.harness_report import parse_harness_report
from writerpool.pool.remote_image import configured_host
from writerpool.report import Report
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.runtime.ssh import SshHost
from writerpool.state.atomic import ensure_private_dir, write_atomic
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


def host_control_file(paths: Paths, name: str) -> Path:
    return paths.state_dir / "isolation-control-hosts" / f"{name}.json"


def _remote_dirs(ssh: SshHost, token: str) -> tuple[str, str, str]:
    """The host user's home, a private canary directory in it and a work directory."""
    home = ssh.exec(["sh", "-c", 'printf %s "$HOME"'], timeout=20).out.strip()
    if not home.startswith("/"):
        raise WriterpoolError("command_failed", f"host {ssh.name} reports no home directory")
    canary_dir, work = f"{home}/.writerpool-canary-{token}", f"/tmp/writerpool-control-{token}"
    made = ssh.exec(["sh", "-c", 'mkdir -m 0700 -- "$1" "$2" && printf "writerpool canary\\n" '
                     '> "$1/secret"', "sh", canary_dir, work], timeout=20)  # fmt: skip
    if made.returncode != 0:
        raise WriterpoolError("command_failed", f"host {ssh.name}: the canary cannot be planted")
    return home, canary_dir, work


def _run_harness(remote: RemotePodman, token: str) -> bytes:
    ssh = remote.host
    home, canary_dir, work = _remote_dirs(ssh, token)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="writerpool-control-") as local,
            host_listener() as port,
            open_relay(Path(local) / ".relay", port) as relay,
            remote.session_socket(relay, f"control-{token}") as relay_there,
        ):
            env = {
                "WRITERPOOL_HARNESS_CANARIES": f"{canary_dir}/secret",
                "WRITERPOOL_HARNESS_HOST_HOME": home,
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
    finally:
        with contextlib.suppress(WriterpoolError):
            ssh.exec(["rm", "-rf", "--", canary_dir, work], timeout=30)


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
    file = host_control_file(paths, name)
    ensure_private_dir(file.parent)
    write_atomic(file, (json.dumps(record.model_dump(mode="json", by_alias=True), indent=2)
                        + "\n").encode())  # fmt: skip
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
