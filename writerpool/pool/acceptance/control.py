"""The isolation control: the harness run uncontained on a writer host (as its account)
must see the planted escapes there. One path for every host: the canary, the loopback
listener, the relay's socket and the uncontained run are the host's (WriterHost); each
host has its own record, since the harness's trust in one machine says nothing of another."""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.agent.backends import BACKENDS
from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.agents import given_directly
from writerpool.pool.acceptance.peers import open_relay, probe_target
from writerpool.pool.acceptance.report import parse_harness_report
from writerpool.report import Report
from writerpool.runtime.host import LOCAL, WriterHost
from writerpool.runtime.hosts import WriterHosts
from writerpool.runtime.image_tools import HARNESS_NAME, harness_archive
from writerpool.state.writer import now
from writerpool.untrusted import DocumentRefused, loads_json, read_regular

# What an uncontained process on this host can always do; the harness must notice each.
EXPECTED_ESCAPES = (
    "host_canary", "host_home", "root_readonly", "no_new_privs", "pid_namespace",
    "user_namespace", "provider_credential",
    # Each agent's directory with the key given to the agent (agents.py given_directly).
    *(f"agent_{name}_key_absent" for name in sorted(BACKENDS)),
)  # fmt: skip
# Network checks an uncontained process always fails: the host's loopback answers; and,
# through an open relay in place of an allowlist proxy, every probe reaches the target.
EXPECTED_NETWORK_ESCAPES = (
    "net_host_loopback", "allow_unlisted", "allow_private", "allow_loopback", "allow_literal",
    "allow_lookup", "allow_sni_mismatch", "allow_sni_missing", "allow_smuggle",
)  # fmt: skip


class ControlRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    schema_version: Literal[1] = Field(default=1, alias="schemaVersion")
    passed: bool
    at: str
    harness_digest: str = Field(alias="harnessDigest")
    missed: tuple[str, ...] = ()


def harness_digest() -> str:
    """The digest of the harness the image carries (its archive's bytes)."""
    return "sha256:" + hashlib.sha256(harness_archive()).hexdigest()


def _first_host(host: str) -> bool:
    """This machine's control keeps the names it had before writers had other hosts: its
    record file, its command without --host, its report target and doctor subject."""
    return host == LOCAL


def control_file(paths: Paths, host: str = LOCAL) -> Path:
    """Each host's own record: the harness's trust in one machine says nothing of another."""
    if _first_host(host):
        return paths.control_file
    return paths.state_dir / "isolation-control-hosts" / f"{host}.json"


def load_control(paths: Paths, host: str = LOCAL) -> ControlRecord | None:
    try:
        return ControlRecord.model_validate(loads_json(read_regular(control_file(paths, host))))
    except (OSError, ValueError, ValidationError, DocumentRefused):
        return None  # no usable record: a control must be run


def control_current(paths: Paths, host: str = LOCAL) -> bool:
    record = load_control(paths, host)
    return record is not None and record.passed and record.harness_digest == harness_digest()


def control_command(host: str) -> str:
    """The command that records `host`'s control."""
    where = "" if _first_host(host) else f" --host {host}"
    return f"writerpool control{where} --apply"


def save_control(paths: Paths, record: ControlRecord, host: str = LOCAL) -> None:
    file = control_file(paths, host)
    ensure_private_dir(file.parent)
    data = json.dumps(record.model_dump(mode="json", by_alias=True), indent=2) + "\n"
    write_atomic(file, data.encode())


def control_target(host: str) -> str:
    """The control's finding target: this machine's historic one, or the host's."""
    return "writer/host/control" if _first_host(host) else control_subject(host)


def control_subject(host: str) -> str:
    """What doctor's isolation_control check names for `host`'s record."""
    return "control" if _first_host(host) else f"host/{host}/control"


def control(paths: Paths, hosts: WriterHosts, name: str, apply: bool) -> Report:
    """`writerpool control [--host NAME] [--apply]`: the plan, or the control run on the
    host `name` of `hosts` (connected only to apply)."""
    hosts.require(name)
    return run_control(paths, hosts.get(name)) if apply else plan_control(name)


def run_control(paths: Paths, host: WriterHost, harness_file: Path | None = None) -> Report:
    """Run the control on `host` and record its outcome there (the caller connected it)."""
    report = Report("control", data={"host": host.name})
    target = control_target(host.name)
    parsed = parse_harness_report(_uncontained(host, harness_file))
    missed = tuple(n for n in (*EXPECTED_ESCAPES, *EXPECTED_NETWORK_ESCAPES)
                   if parsed is None or parsed.status_of(n) != "fail")  # fmt: skip
    if parsed is not None and parsed.network != "not_limited":
        missed += ("network",)
    passed = parsed is not None and not missed
    record = ControlRecord(passed=passed, at=now(), harness_digest=harness_digest(), missed=missed)
    save_control(paths, record, host.name)
    if passed:
        report.add("isolation_control_passed", "ok", target,
                   f"the uncontained harness on {host.name} detected every expected escape; "
                   "canary removed")  # fmt: skip
    else:
        report.add("isolation_control_failed", "error", target,
                   "the harness did not detect: " + (", ".join(missed) or "(no valid report)"),
                   remedy=f"the harness cannot be trusted on {host.name}; no writer there can "
                   "be accepted (is python3 installed for its account?)",
                   missed=list(missed))  # fmt: skip
    return report


def plan_control(host: str) -> Report:
    """What `control --apply` would do on `host` (nothing is connected or planted)."""
    report = Report("control", data={"host": host})
    report.add("isolation_control_planned", "planned", control_target(host),
               f"would plant a canary in the home of host {host}'s account, run the harness "
               "there uncontained in a private work directory, and remove both")  # fmt: skip
    return report


def _uncontained(host: WriterHost, program: Path | None) -> bytes:
    """The harness's report (`program`, else the image's), run uncontained on `host`
    against its canary and loopback, the open relay here (its socket forwarded there), and
    a credential in its environment; everything planted ends with the run."""
    with contextlib.ExitStack() as stack:
        canary = stack.enter_context(host.planted_canary())
        port = stack.enter_context(host.loopback_listener())
        here = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="wp-relay-")))
        if program is None:
            program = here / HARNESS_NAME
            program.write_bytes(harness_archive())
        target_port = stack.enter_context(probe_target())  # the relay's names lead here
        relay = stack.enter_context(open_relay(here / "relay", target_port))
        token = secrets.token_hex(6)
        key = "wp" + "canary-" + secrets.token_hex(16)
        relay_there = stack.enter_context(host.forwarded_socket(relay, f"control-{token}"))
        env = {
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_CANARY": "scan",
            "WRITERPOOL_HARNESS_HOST_PORT": str(port),
            "WRITERPOOL_CONNECT_SOCKET": relay_there,
            "WRITERPOOL_HARNESS_ALLOW_PORT": str(target_port),
            # As an uncontained agent would hold a provider key: it must be found.
            "WRITERPOOL_CONTROL_CREDENTIAL": key,
            # Each agent's directory with the key given to the agent directly.
            **given_directly(key),
        }
        return host.run_uncontained(program, env)
