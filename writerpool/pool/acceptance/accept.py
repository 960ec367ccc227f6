"""Acceptance: the harness inside the writer's exact container on its host, bound to a
fingerprint of that very container's spec (pool/writer/container.py writer_spec, built through
the host) and of the host's facts. One path for every host: the canary, the loopback
listener and the egress endpoint are the host's (runtime/host.py WriterHost)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

from writerpool import __version__
from writerpool.agent.egress import EgressRequest, grant_key
from writerpool.atomic import write_atomic
from writerpool.config.models import Config, Egress, Pool, Provider
from writerpool.config.network import classification, describe, network_info
from writerpool.config.paths import Paths
from writerpool.config.providers import resolve_provider
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.pool.acceptance.control import control_command, control_current, harness_digest
from writerpool.pool.acceptance.peers import probe_target
from writerpool.pool.acceptance.report import parse_harness_report
from writerpool.pool.writer.container import EGRESS_PORT, has_allowlist, session_spec, writer_of
from writerpool.report import Finding
from writerpool.runtime.host import EngineFacts, Writer, WriterHost
from writerpool.runtime.image_tools import HARNESS
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import WriterState, load_state, now, save_state

ACCEPTANCE_PROVIDER = "acceptance"
DEAD_UPSTREAM = "http://127.0.0.1:9/v1"
CLASSES = ("limited", "limited-allowlist", "not_limited")


def fingerprint_groups(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool
) -> dict[str, str]:
    """Everything readiness is bound to, by group (so a change can be named). Adding or
    removing an allowlist changes the container spec; its entries do not."""
    facts = host.facts()
    return groups_of(state, session_spec(paths, host, state, pool, facts=facts), facts)


def groups_given(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool, image_id: str,
    facts: EngineFacts,
) -> dict[str, str]:  # fmt: skip
    """The same with the image and the host's facts known (a warm writer's container
    runs that image): no Podman call."""
    return groups_of(state, session_spec(paths, host, state, pool, image_id, facts), facts)


def groups_of(state: WriterState, spec: ContainerSpec, facts: EngineFacts) -> dict[str, str]:
    """The groups of a writer whose sessions run `spec` on a host with `facts`."""
    return {
        "image": spec.image_id,
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
# harness asks for them; "unlisted" is left out of the list, and the name of its lookup
# probe is in neither). Nothing leaves this machine (where the allowlist proxy runs): the
# listed name leads to the probes' target here, the others are refused before any
# connect (docs/security.md lists the probes).
ACCEPTANCE_RESOLVE = {
    "listed.acceptance.test": ("127.0.0.1",),
    "private.acceptance.test": ("10.255.255.1",),
    "loopback.acceptance.test": ("127.0.0.2",),
    "unlisted.acceptance.test": ("127.0.0.1",),
}


def acceptance_allowlist(port: int) -> tuple[str, ...]:
    """The allowlist acceptance gives a writer's proxy: three names, the listed one also
    as an `http://` entry, and the one address the listed name may reach."""
    names = ("listed", "private", "loopback")
    return (*(f"{n}.acceptance.test:{port}" for n in names),
            f"http://listed.acceptance.test:{port}", f"127.0.0.1/32:{port}")  # fmt: skip


@contextlib.contextmanager
def _canary_granted(
    host: WriterHost, writer: Writer, state: WriterState, pool: Pool, allow_port: int | None
) -> Iterator[None]:
    """A canary credential sent through the session's real egress path (the proxy, its
    token in the agent directory rendered through the host, its socket where the host's
    egress endpoint leads) for the block."""
    config = _acceptance_config(pool, allow_port)
    resolved = resolve_provider(config, ACCEPTANCE_PROVIDER)
    assert resolved is not None
    canary = "wp" + "canary-" + secrets.token_hex(16)
    with contextlib.ExitStack() as stack:
        egress = None
        if network_info(state.network).egress:
            # Loaded only for a network with egress: the others start no egress process.
            from writerpool.egress.supervisor import EgressSupervisor  # noqa: PLC0415

            egress = EgressSupervisor()
            stack.callback(egress.close)
        with host.agent_dir(writer) as agent_dir:
            request = EgressRequest(
                config=config, provider=ACCEPTANCE_PROVIDER, network=state.network,
                agent_dir=agent_dir, egress_dir=writer.record.egress, session="acceptance",
                writer=state.name, port=EGRESS_PORT,
                allow=acceptance_allowlist(allow_port) if allow_port is not None else None,
            )  # fmt: skip
            held = grant_key(request, egress, resolved, canary)
            stack.callback(held.revoke)
        held.ready()
        yield


def _run_harness(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool, spec: ContainerSpec
) -> tuple[int, bytes]:
    """The harness in `spec` (the session's container) on the writer's host, against that
    host's canary, home and loopback; every probe and forward ends with the run."""
    allowlist = has_allowlist(paths, state)
    host.check_network(state.network, ("allowlist",) if allowlist else None)
    writer = writer_of(paths, state)
    info = network_info(state.network)
    with contextlib.ExitStack() as stack:
        canary = stack.enter_context(host.planted_canary())
        port = stack.enter_context(host.loopback_listener())
        # The allowlist proxy runs here: the listed name leads to the probes' target here.
        allow_port = stack.enter_context(probe_target()) if allowlist else None
        stack.enter_context(_canary_granted(host, writer, state, pool, allow_port))
        if info.egress:
            stack.enter_context(host.egress_endpoint(writer))
        env = {
            **spec.env,
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_WORK": "/work",
            "WRITERPOOL_HARNESS_CANARY": "scan" if info.limited else "skip",
            "WRITERPOOL_HARNESS_HOST_PORT": str(port),
            **(
                {"WRITERPOOL_HARNESS_ALLOW_PORT": str(allow_port)} if allow_port is not None else {}
            ),
        }
        crash_point("acceptance.probes_held")
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
    failure_file = writer_of(paths, state).record.failure_file
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
    spec = session_spec(paths, host, state, pool)
    before = groups_of(state, spec, host.facts())  # the digest of the spec that runs
    exit_code, out = _run_harness(paths, host, state, pool, spec)
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
