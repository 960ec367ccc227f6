"""The isolation control: the harness run uncontained must see the planted escapes."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.paths import Paths
from writerpool.pool.harness_report import parse_harness_report
from writerpool.pool.probes import canary_here
from writerpool.report import Report
from writerpool.runtime.host import LOCAL
from writerpool.runtime.image_tools import HARNESS_SOURCE
from writerpool.runtime.probe import run_harness_on_host
from writerpool.state.writer import now
from writerpool.untrusted import DocumentRefused, loads_json, read_regular

TARGET = "writer/host/control"
# What an uncontained process on this host can always do; the harness must notice each.
EXPECTED_ESCAPES = (
    "host_canary", "host_home", "root_readonly", "no_new_privs", "pid_namespace",
    "user_namespace", "provider_credential",
)  # fmt: skip
# Network checks an uncontained process always fails: the host's loopback answers; and,
# through an open relay in place of an allowlist proxy, every name passes.
EXPECTED_NETWORK_ESCAPES = ("net_host_loopback", "allow_unlisted", "allow_private",
                            "allow_loopback")  # fmt: skip


class ControlRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    schema_version: Literal[1] = Field(default=1, alias="schemaVersion")
    passed: bool
    at: str
    harness_digest: str = Field(alias="harnessDigest")
    missed: tuple[str, ...] = ()


@contextmanager
def open_relay(directory: Path, port: int) -> Iterator[Path]:
    """What an allowlist proxy must not be: a relay to every `*.acceptance.test` name
    (all on the host listener's port), so the harness's allowlist checks see an escape."""
    from writerpool.egress.allowlist import Allowlist, expand  # noqa: PLC0415
    from writerpool.egress.connect import ConnectLimits, ConnectSession, LocalListener  # noqa: PLC0415
    from writerpool.egress.loop import InProcessLoop  # noqa: PLC0415

    names = [f"{n}.acceptance.test" for n in ("listed", "unlisted", "private", "loopback")]
    words = (*(f"{n}:{port}" for n in names), f"127.0.0.0/8:{port}")
    directory.mkdir(mode=0o700, exist_ok=True)
    loop = InProcessLoop()
    relay = LocalListener(loop, ConnectSession(
        session="control", writer=None, socket_path=directory / "connect.sock",
        allowlist=Allowlist(expand(words, {})[0]),
        resolve={n: ("127.0.0.1",) for n in names},
        limits=ConnectLimits(concurrent=8, total=64, header_bytes=4096, header_seconds=10,
                             idle_seconds=30),
    ))  # fmt: skip
    try:
        relay.start()
        yield relay.listener.socket_path
    finally:
        relay.stop()
        loop.close()


@contextmanager
def host_listener() -> Iterator[int]:
    """A port listening on the host's loopback, which a writer must not reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def harness_path() -> Path:
    return HARNESS_SOURCE


def harness_digest(path: Path | None = None) -> str:
    return "sha256:" + hashlib.sha256((path or harness_path()).read_bytes()).hexdigest()


def control_file(paths: Paths, host: str = LOCAL) -> Path:
    """Each host's own record: the harness's trust in one machine says nothing of another."""
    if host == LOCAL:
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
    where = "" if host == LOCAL else f" --host {host}"
    return f"writerpool control{where} --apply"


def save_control(paths: Paths, record: ControlRecord, host: str = LOCAL) -> None:
    file = control_file(paths, host)
    ensure_private_dir(file.parent)
    data = json.dumps(record.model_dump(mode="json", by_alias=True), indent=2) + "\n"
    write_atomic(file, data.encode())


def run_control(
    paths: Paths,
    apply: bool,
    harness_file: Path | None = None,
    runner: Callable[..., bytes] = run_harness_on_host,
) -> Report:
    report = Report("control")
    if not apply:
        report.add(
            "isolation_control_planned",
            "planned",
            TARGET,
            "would plant canary files under the home directory, run the harness "
            "uncontained on a disposable clone, and remove the canaries",
        )
        return report
    program = harness_file or harness_path()
    work = Path(tempfile.mkdtemp(prefix="writerpool-control-"))
    try:
        with (
            canary_here() as canary,
            host_listener() as port,
            open_relay(work / ".relay", port) as relay,
        ):
            env = {
                "WRITERPOOL_HARNESS_CANARIES": canary.file,
                "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
                "WRITERPOOL_HARNESS_WORK": str(work),
                "WRITERPOOL_HARNESS_CANARY": "scan",
                "WRITERPOOL_HARNESS_HOST_PORT": str(port),
                "WRITERPOOL_CONNECT_SOCKET": str(relay),
                "WRITERPOOL_HARNESS_ALLOW_PORT": str(port),
                # As an uncontained agent would hold a provider key: it must be found.
                "WRITERPOOL_CONTROL_CREDENTIAL": "wp" + "canary-" + secrets.token_hex(16),
            }
            out = runner(program, env, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    parsed = parse_harness_report(out)
    missed = tuple(
        name
        for name in (*EXPECTED_ESCAPES, *EXPECTED_NETWORK_ESCAPES)
        if parsed is None or parsed.status_of(name) != "fail"
    )
    if parsed is not None and parsed.network != "not_limited":
        missed += ("network",)
    passed = parsed is not None and not missed
    save_control(
        paths,
        ControlRecord(passed=passed, at=now(), harness_digest=harness_digest(), missed=missed),
    )
    if passed:
        report.add(
            "isolation_control_passed",
            "ok",
            TARGET,
            "the uncontained harness detected every expected escape; canaries removed",
        )
    else:
        report.add(
            "isolation_control_failed",
            "error",
            TARGET,
            "the harness did not detect: " + (", ".join(missed) or "(no valid report)"),
            remedy="the harness cannot be trusted on this host; no writer can be accepted",
            missed=list(missed),
        )
    return report
