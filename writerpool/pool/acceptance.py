"""Acceptance: the harness inside the writer's exact container, bound to a fingerprint."""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from writerpool import __version__
from writerpool.agent.egress import EgressRequest, grant_key
from writerpool.atomic import write_atomic
from writerpool.config.models import Config, Egress, Pool, Provider
from writerpool.config.modes import load_modes
from writerpool.config.network import classification, describe, network_info
from writerpool.config.paths import Paths
from writerpool.config.providers import resolve_provider
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.pool.acceptance_remote import run_remote_harness
from writerpool.pool.container import EGRESS_PORT, writer_image, writer_of, writer_spec
from writerpool.pool.control import (
    control_command,
    control_current,
    harness_digest,
    host_listener,
)
from writerpool.pool.harness_report import parse_harness_report
from writerpool.pool.probes import canary_here
from writerpool.report import Finding
from writerpool.runtime.host import EngineFacts, WriterHost
from writerpool.runtime.image_tools import HARNESS
from writerpool.runtime.remote import RemotePodman
from writerpool.state.writer import WriterState, load_state, now, save_state

ACCEPTANCE_PROVIDER = "acceptance"
Granted = contextlib.AbstractContextManager[None]
DEAD_UPSTREAM = "http://127.0.0.1:9/v1"
CLASSES = ("limited", "limited-allowlist", "not_limited")


def has_allowlist(paths: Paths, state: WriterState) -> bool:
    """Whether the writer's workspace has an egress allowlist (its sessions get the
    allowlist proxy and the proxy variables)."""
    entry = load_modes(paths).workspaces.get(state.alias)
    return bool(entry and entry.container and entry.container.allow)


def fingerprint_groups(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool
) -> dict[str, str]:
    """Everything readiness is bound to, by group (so a change can be named). Adding or
    removing an allowlist changes the container spec; its entries do not."""
    return groups_given(paths, state, pool, writer_image(paths, host, state.image), host.facts())


def groups_given(
    paths: Paths, state: WriterState, pool: Pool, image_id: str, facts: EngineFacts
) -> dict[str, str]:
    """The same with the image and the host's facts known (a warm writer's container
    runs that image): no Podman call."""
    spec = writer_spec(paths, state, image_id, pool, facts, allow=has_allowlist(paths, state))
    return {
        "image": image_id,
        "podman": facts.podman_version,
        "writerpool": __version__,
        "container_spec": spec.digest(),
        "network": state.network,
        "cache": state.cache,
        "harness": harness_digest(),
    }


def fingerprint_of(groups: dict[str, str]) -> str:
    data = json.dumps(groups, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def current_fingerprint(paths: Paths, host: WriterHost, state: WriterState, pool: Pool) -> str:
    return fingerprint_of(fingerprint_groups(paths, host, state, pool))


def readiness(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool
) -> tuple[str, str | None]:
    """The writer's phase and reason as of now (a ready record can have gone stale)."""
    if state.phase != "ready":
        return state.phase, state.reason
    if not control_current(paths, host.name):
        return "not_ready", "isolation_control_required"
    try:
        if current_fingerprint(paths, host, state, pool) != state.fingerprint:
            return "not_ready", "writer_acceptance_stale"
    except WriterpoolError as exc:
        return "not_ready", exc.code
    return "ready", None


def _failure_record(code: str, **fields: Any) -> bytes:
    record = {"schemaVersion": 1, "at": now(), "code": code, **fields}
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()


def _token_list(names: object) -> list[str]:
    # Only short token-shaped strings leave the harness report.
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and n.replace("_", "").isalnum() and len(n) < 40]


def _acceptance_config(pool: Pool, allow_port: int | None) -> Config:
    # A provider that leads nowhere: the harness never makes an allowed request, and
    # if one got through, the discard port on the host's loopback would take it.
    egress = Egress()
    if allow_port is not None:
        egress = Egress(resolve=ACCEPTANCE_RESOLVE)
    return Config(pool=pool, egress=egress,
                  providers={ACCEPTANCE_PROVIDER: Provider(base_url=DEAD_UPSTREAM)})  # fmt: skip


# The allowlist acceptance checks: names only the acceptance's own proxy resolves (the
# harness asks for them; "unlisted" is left out of the list). Nothing leaves the host:
# the listed name leads to the host listener, the others are refused before any connect.
ACCEPTANCE_RESOLVE = {
    "listed.acceptance.test": ("127.0.0.1",),
    "private.acceptance.test": ("10.255.255.1",),
    "loopback.acceptance.test": ("127.0.0.2",),
    "unlisted.acceptance.test": ("127.0.0.1",),
}


def acceptance_allowlist(port: int) -> tuple[str, ...]:
    """The allowlist acceptance gives a writer's proxy: three names and the one address
    the listed name may reach."""
    names = ("listed", "private", "loopback")
    return (*(f"{n}.acceptance.test:{port}" for n in names), f"127.0.0.1/32:{port}")


@contextlib.contextmanager
def _canary_granted(
    paths: Paths, state: WriterState, pool: Pool, dirs: tuple[Path, Path], allow_port: int | None
) -> Iterator[None]:
    """A canary credential sent through the session's real egress path (the proxy, its
    token in the agent directory `dirs[0]`, its socket in `dirs[1]`) for the block."""
    agent_dir, egress_dir = dirs
    config = _acceptance_config(pool, allow_port)
    request = EgressRequest(
        config=config, provider=ACCEPTANCE_PROVIDER, network=state.network,
        agent_dir=agent_dir, egress_dir=egress_dir, session="acceptance",
        writer=state.name, port=EGRESS_PORT,
        allow=acceptance_allowlist(allow_port) if allow_port is not None else None,
    )  # fmt: skip
    resolved = resolve_provider(config, ACCEPTANCE_PROVIDER)
    assert resolved is not None
    canary = "wp" + "canary-" + secrets.token_hex(16)
    egress = None
    if network_info(state.network).egress:
        from writerpool.egress.host import EgressHost  # noqa: PLC0415

        egress = EgressHost()
    try:
        held = grant_key(request, egress, resolved, canary)
        try:
            held.ready()
            yield
        finally:
            held.revoke()
    finally:
        if egress is not None:
            egress.close()


def _run_harness(
    host: WriterHost, spec_args: tuple[Paths, WriterState, str, Pool]
) -> tuple[int, bytes]:
    paths, state, image_id, pool = spec_args
    allowlist = has_allowlist(paths, state)
    if isinstance(host, RemotePodman):

        def granted(agent: Path, egress: Path, port: int | None) -> Granted:
            return _canary_granted(paths, state, pool, (agent, egress), port)

        done = run_remote_harness(host, paths, state, image_id, pool, allowlist, granted)
        return done.returncode, done.stdout
    spec = writer_spec(paths, state, image_id, pool, host.facts(), allow=allowlist)
    writer = writer_of(paths, state)
    info = network_info(state.network)
    with (
        canary_here() as canary,
        host_listener() as port,
        _canary_granted(paths, state, pool, (writer.agent, writer.egress),
                        port if allowlist else None),
    ):  # fmt: skip
        env = {
            **spec.env,
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_WORK": "/work",
            "WRITERPOOL_HARNESS_CANARY": "scan" if info.limited else "skip",
            "WRITERPOOL_HARNESS_HOST_PORT": str(port),
            **({"WRITERPOOL_HARNESS_ALLOW_PORT": str(port)} if allowlist else {}),
        }
        # The harness the image carries (runtime/image_tools.py).
        done = host.run(spec.model_copy(update={"env": env}), ["python3", HARNESS],
                        timeout=120)  # fmt: skip
    return done.returncode, done.stdout


def accept(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    pool: Pool,
    after_run: Callable[[], None] | None = None,
) -> tuple[WriterState, Finding]:
    """Run acceptance on a leased, fenced writer; record readiness or the failure."""
    target = f"writer/{state.alias}/{state.name}"
    failure_file = writer_of(paths, state).failure_file
    if not control_current(paths, host.name):
        state = save_state(
            paths.writer_dir(state.name),
            state.model_copy(update={"phase": "not_ready", "reason": "isolation_control_required"}),
        )
        return state, Finding(
            "isolation_control_required",
            "error",
            target,
            f"run `{control_command(host.name)}` first",
        )
    before = fingerprint_groups(paths, host, state, pool)
    exit_code, out = _run_harness(host, (paths, state, before["image"], pool))
    crash_point("acceptance.harness_ran")
    if after_run is not None:
        after_run()
    report = parse_harness_report(out)
    failed = report.with_status("fail") if report else []
    inconclusive = report.with_status("inconclusive") if report else []
    network = report.network if report else None
    expected = classification(state.network, has_allowlist(paths, state))
    ok = (
        exit_code == 0
        and report is not None
        and report.verdict == "pass"
        and not failed
        and not inconclusive
        and network == expected
    )
    code, message = "writer_accepted", ""  # the failure paths below set the message
    changed: list[str] = []
    if not ok:
        code = "acceptance_harness_failed"
        if report is not None and network in CLASSES and network != expected:
            failed += report.network_not_passed() or ["network"]
        message = "the contained harness did not pass: " + (
            ", ".join(failed + inconclusive) or f"network {network}, expected {expected}"
        )
    else:
        # Re-read: the recorded settings, the pin or Podman may have moved during the run.
        fresh = load_state(paths.writer_dir(state.name)) or state
        after = fingerprint_groups(paths, host, fresh, pool)
        changed = sorted(k for k in before if before[k] != after.get(k))
        if changed:
            code, message = (
                "acceptance_fingerprint_changed",
                "settings changed during acceptance: " + ", ".join(changed),
            )
    if code != "writer_accepted":
        write_atomic(
            failure_file,
            _failure_record(
                code,
                exitCode=exit_code,
                report="absent" if not out.strip() else ("present" if report else "invalid"),
                verdict=report.verdict if report else None,
                network=network if network in CLASSES else None,
                failedChecks=_token_list(failed),
                inconclusiveChecks=_token_list(inconclusive),
                changedDigestGroups=_token_list(changed),
            ),
        )
        state = save_state(
            paths.writer_dir(state.name),
            state.model_copy(update={"phase": "not_ready", "reason": code, "fingerprint": None}),
        )
        return state, Finding(code, "error", target, message)
    failure_file.unlink(missing_ok=True)
    state = save_state(
        paths.writer_dir(state.name),
        state.model_copy(
            update={
                "phase": "ready",
                "reason": None,
                "fingerprint": fingerprint_of(before),
                "accepted_at": now(),
            }
        ),
    )
    # The network probes' verdicts (names and pass/fail only: the details are the
    # container's words) show what the classification rests on.
    checks = report.network_checks if report else {}
    probes = {n: checks[n].status for n in _token_list(list(checks))}
    return state, Finding(
        code, "ok", target, f"accepted as {expected}; network {describe(state.network)}",
        data={"networkClass": expected, "networkChecks": dict(sorted(probes.items())[:64])},
    )  # fmt: skip
