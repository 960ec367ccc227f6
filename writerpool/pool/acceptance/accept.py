"""Acceptance: the harness inside the writer's exact container on its host, bound to a
fingerprint of that very container's spec (pool/writer/container.py writer_spec, built through
the host) and of the host's facts. One path for every host: the canary, the loopback
listener and the egress endpoint are the host's (runtime/host.py WriterHost)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from writerpool import __version__
from writerpool.atomic import write_atomic
from writerpool.config.models import Config, Egress, Provider
from writerpool.config.network import classification, describe, network_info
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import WriterpoolError
from writerpool.pool.acceptance.agents import (
    agent_commands,
    agents_digest,
    canary_granted,
    profile_agents,
    reached_provider,
)
from writerpool.pool.acceptance.control import control_command, control_current, harness_digest
from writerpool.pool.acceptance.peers import probe_target, provider_listener
from writerpool.pool.acceptance.report import HarnessReport, parse_harness_report
from writerpool.pool.writer.container import AGENT_DIR, has_allowlist, session_spec, writer_of
from writerpool.report import Finding
from writerpool.runtime.host import EngineFacts, WriterHost
from writerpool.runtime.image_tools import HARNESS
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import WriterState, load_state, now, save_state

ACCEPTANCE_PROVIDER = "acceptance"
CLASSES = ("limited", "limited-allowlist", "not_limited")


def fingerprint_groups(
    paths: Paths, host: WriterHost, state: WriterState, config: Config
) -> dict[str, str]:
    """Everything readiness is bound to, by group (so a change can be named). Adding or
    removing an allowlist changes the container spec; its entries do not."""
    facts = host.facts()
    spec = session_spec(paths, host, state, config.pool, facts=facts)
    return groups_of(state, spec, facts, config)


def groups_given(
    paths: Paths, host: WriterHost, state: WriterState, config: Config, image_id: str,
    facts: EngineFacts,
) -> dict[str, str]:  # fmt: skip
    """The same with the image and the host's facts known (a warm writer's container
    runs that image): no Podman call."""
    spec = session_spec(paths, host, state, config.pool, image_id, facts)
    return groups_of(state, spec, facts, config)


def groups_of(
    state: WriterState, spec: ContainerSpec, facts: EngineFacts, config: Config
) -> dict[str, str]:
    """The groups of a writer whose sessions run `spec` on a host with `facts`, and the
    agents its profiles use in `config` (acceptance checks each: agents.py)."""
    return {
        "image": spec.image_id,
        "podman": facts.podman_version,
        "writerpool": __version__,
        "container_spec": spec.digest(),
        "network": state.network,
        "cache": state.cache,
        "harness": harness_digest(),
        "agents": agents_digest(config, state.profiles),
    }


def fingerprint_of(groups: dict[str, str]) -> str:
    data = json.dumps(groups, sort_keys=True).encode()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def current_fingerprint(paths: Paths, host: WriterHost, state: WriterState, config: Config) -> str:
    return fingerprint_of(fingerprint_groups(paths, host, state, config))


def readiness(
    paths: Paths, host: WriterHost, state: WriterState, config: Config
) -> tuple[str, str | None]:
    """The writer's phase and reason as of now (a ready record can have gone stale)."""
    if state.phase != "ready":
        return state.phase, state.reason
    if not control_current(paths, host.name):
        return "not_ready", "isolation_control_required"
    try:
        if current_fingerprint(paths, host, state, config) != state.fingerprint:
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
    return [n for n in names if isinstance(n, str) and len(n) < 40
            and n.replace("_", "").replace("-", "").isalnum()]  # fmt: skip


def _acceptance_config(config: Config, allow_port: int | None, provider_port: int) -> Config:
    # Acceptance's provider on this machine's loopback (where the proxy runs), which
    # records what each agent's request brought (peers.py provider_listener). It speaks
    # the Responses API, which every agent backend can be pointed at.
    egress = Egress()
    if allow_port is not None:
        egress = Egress(resolve=ACCEPTANCE_RESOLVE)
    provider = Provider(base_url=f"http://127.0.0.1:{provider_port}/v1", api="openai-responses")
    return Config(pool=config.pool, egress=egress, providers={ACCEPTANCE_PROVIDER: provider})


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


def _run_harness(
    paths: Paths, host: WriterHost, state: WriterState, config: Config, spec: ContainerSpec
) -> tuple[int, bytes, list[str]]:
    """The harness in `spec` (the session's container) on the writer's host, against that
    host's canary, home and loopback; every probe and forward ends with the run. Also
    each agent's via-proxy check whose request never reached acceptance's provider with
    the canary (a writer with a provider proxy)."""
    allowlist = has_allowlist(paths, state)
    host.check_network(state.network, ("allowlist",) if allowlist else None)
    writer = writer_of(paths, state)
    info = network_info(state.network)
    with contextlib.ExitStack() as stack:
        canary = stack.enter_context(host.planted_canary())
        port = stack.enter_context(host.loopback_listener())
        # The allowlist proxy runs here: the listed name leads to the probes' target here.
        allow_port = stack.enter_context(probe_target()) if allowlist else None
        agents = profile_agents(config, state.profiles)
        allow = acceptance_allowlist(allow_port) if allow_port is not None else None
        provider_port, arrived = stack.enter_context(provider_listener())
        given = _acceptance_config(config, allow_port, provider_port)
        key = stack.enter_context(canary_granted(host, writer, state, given, ACCEPTANCE_PROVIDER,
                                                 agents, allow))  # fmt: skip
        if info.egress:
            stack.enter_context(host.egress_endpoint(writer))
        env = {
            **spec.env,
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_WORK": "/work",
            "WRITERPOOL_HARNESS_CANARY": "scan" if info.limited else "skip",
            "WRITERPOOL_HARNESS_HOST_PORT": str(port),
            "WRITERPOOL_HARNESS_AGENTS": agent_commands(agents),
            "WRITERPOOL_HARNESS_AGENT_DIR": AGENT_DIR,
            **(
                {"WRITERPOOL_HARNESS_ALLOW_PORT": str(allow_port)} if allow_port is not None else {}
            ),
        }
        crash_point("acceptance.probes_held")
        # The harness the image carries (runtime/image_tools.py).
        done = host.run(spec.model_copy(update={"env": env}), ["python3", HARNESS],
                        timeout=120)  # fmt: skip
    reached = reached_provider(arrived, key)
    unproven = [f"agent_{n}_via_proxy" for n in agents if info.egress and n not in reached]
    return done.returncode, done.stdout, unproven


@dataclass
class _Failure:
    code: str
    message: str
    failed: list[str] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def accept(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    config: Config,
    after_run: Callable[[], None] | None = None,
) -> tuple[WriterState, Finding]:
    """Run acceptance on a leased, fenced writer; record readiness or the failure."""
    target = f"writer/{state.alias}/{state.name}"
    if not control_current(paths, host.name):
        state = save_state(
            paths.writer_dir(state.name),
            state.model_copy(update={"phase": "not_ready", "reason": "isolation_control_required"}),
        )
        return state, Finding("isolation_control_required", "error", target,
                              f"run `{control_command(host.name)}` first")  # fmt: skip
    spec = session_spec(paths, host, state, config.pool)
    before = groups_of(state, spec, host.facts(), config)  # the digest of the spec that runs
    exit_code, out, unproven = _run_harness(paths, host, state, config, spec)
    crash_point("acceptance.harness_ran")
    if after_run is not None:
        after_run()
    report = parse_harness_report(out)
    expected = classification(state.network, has_allowlist(paths, state))
    failure = _judged(exit_code, report, expected, unproven)
    if failure is None:
        # Re-read: the recorded settings, the pin or Podman may have moved during the run.
        fresh = load_state(paths.writer_dir(state.name)) or state
        after = fingerprint_groups(paths, host, fresh, config)
        changed = sorted(k for k in before if before[k] != after.get(k))
        if changed:
            failure = _Failure("acceptance_fingerprint_changed",
                               "settings changed during acceptance: " + ", ".join(changed),
                               changed=changed)  # fmt: skip
    if failure is not None:
        return _record_failure(paths, state, target, failure, exit_code, out, report)
    return _record_ready(paths, state, target, fingerprint_of(before), report, expected)


def _judged(
    exit_code: int, report: HarnessReport | None, expected: str, unproven: list[str]
) -> _Failure | None:
    """None when the contained harness passed with the expected network class and every
    agent's request reached acceptance's provider through the proxy."""
    failed = report.with_status("fail") if report else []
    failed += [n for n in unproven if n not in failed]
    inconclusive = report.with_status("inconclusive") if report else []
    network = report.network if report else None
    if (exit_code == 0 and report is not None and report.verdict == "pass" and not failed
            and not inconclusive and network == expected):  # fmt: skip
        return None
    if report is not None and network in CLASSES and network != expected:
        failed += report.network_not_passed() or ["network"]
    message = "the contained harness did not pass: " + (
        ", ".join(failed + inconclusive) or f"network {network}, expected {expected}"
    )
    return _Failure("acceptance_harness_failed", message, failed, inconclusive)


def _record_failure(
    paths: Paths, state: WriterState, target: str, failure: _Failure, exit_code: int,
    out: bytes, report: HarnessReport | None,
) -> tuple[WriterState, Finding]:  # fmt: skip
    network = report.network if report else None
    write_atomic(
        writer_of(paths, state).record.failure_file,
        _failure_record(
            failure.code,
            exitCode=exit_code,
            report="absent" if not out.strip() else ("present" if report else "invalid"),
            verdict=report.verdict if report else None,
            network=network if network in CLASSES else None,
            failedChecks=_token_list(failure.failed),
            inconclusiveChecks=_token_list(failure.inconclusive),
            changedDigestGroups=_token_list(failure.changed),
        ),
    )
    state = save_state(
        paths.writer_dir(state.name),
        state.model_copy(update={"phase": "not_ready", "reason": failure.code,
                                 "fingerprint": None}),
    )  # fmt: skip
    return state, Finding(failure.code, "error", target, failure.message)


def _record_ready(
    paths: Paths, state: WriterState, target: str, fingerprint: str, report: HarnessReport | None,
    expected: str,
) -> tuple[WriterState, Finding]:  # fmt: skip
    writer_of(paths, state).record.failure_file.unlink(missing_ok=True)
    update = {"phase": "ready", "reason": None, "fingerprint": fingerprint, "accepted_at": now()}
    state = save_state(paths.writer_dir(state.name), state.model_copy(update=update))
    # The network probes' and each agent's verdicts (names and pass/fail only: the
    # details are the container's words) show what the classification rests on.
    network = report.network_checks if report else {}
    probes = {n: network[n].status for n in _token_list(list(network))}
    checks = report.checks if report else {}
    agents = {n: checks[n].status for n in _token_list(list(checks)) if n.startswith("agent_")}
    names = sorted({n.removeprefix("agent_").rsplit("_", 2)[0] for n in agents})
    return state, Finding(
        "writer_accepted", "ok", target,
        f"accepted as {expected}; network {describe(state.network)}; "
        f"agents {', '.join(names) or 'none'} checked",
        data={"networkClass": expected, "networkChecks": dict(sorted(probes.items())[:64]),
              "agentChecks": dict(sorted(agents.items())[:64])},
    )  # fmt: skip
