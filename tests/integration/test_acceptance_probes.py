"""The harness's allowlist probes, as the image carries them (the archive, run as a
process), against the real allowlist proxy and against the isolation control's open
relay, on this machine. Through the proxy, given acceptance's own allowlist and answers,
each probe is refused with its own reason, the proxy's audit says the same, and its
resolver is asked nothing: the lookup probe's name, listed nowhere and mapped nowhere,
reaches no resolver (no query could leave). Through the open relay every probe reaches
the target, and its detail says what arrived. The harness runs uncontained here: only
its allowlist probes are read."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_egress_connect import RecordingLookup
from tests.support.connect import Records, open_proxy
from writerpool.egress.loop import InProcessLoop
from writerpool.pool.acceptance.accept import ACCEPTANCE_RESOLVE, acceptance_allowlist
from writerpool.pool.acceptance.control import EXPECTED_NETWORK_ESCAPES
from writerpool.pool.acceptance.peers import open_relay, probe_target
from writerpool.runtime.image_tools import HARNESS_NAME, harness_archive

REFUSED = sorted(n for n in EXPECTED_NETWORK_ESCAPES if n.startswith("allow_"))
# Each probe's reason, as the proxy audits it and the harness reads it back.
REASONS = {
    "allow_unlisted": "not_listed", "allow_private": "address_private",
    "allow_loopback": "address_loopback", "allow_literal": "not_listed",
    "allow_lookup": "not_listed", "allow_sni_mismatch": "sni_mismatch",
    "allow_sni_missing": "sni_missing", "allow_smuggle": "bad_request",
}  # fmt: skip


@pytest.fixture
def loop() -> Iterator[InProcessLoop]:
    running = InProcessLoop()
    yield running
    running.close()


def allowlist_probes(tmp_path: Path, socket_path: Path, port: int) -> dict[str, dict[str, str]]:
    program = tmp_path / HARNESS_NAME
    program.write_bytes(harness_archive())
    env = {"PATH": "/usr/bin:/bin", "WRITERPOOL_HARNESS_WORK": str(tmp_path),
           "WRITERPOOL_CONNECT_SOCKET": str(socket_path),
           "WRITERPOOL_HARNESS_ALLOW_PORT": str(port)}  # fmt: skip
    done = subprocess.run([sys.executable, str(program)], env=env, capture_output=True,
                          timeout=120, check=True)  # fmt: skip
    checks = json.loads(done.stdout)["networkChecks"]
    probes = {n: c for n, c in checks.items() if n.startswith("allow_")}
    for name, check in sorted(probes.items()):
        print(f"{name}: {check['status']} ({check['detail']})")
    return probes


def test_through_the_allowlist_proxy_each_probe_is_refused_with_its_reason(
    loop: InProcessLoop, tmp_path: Path
) -> None:
    assert sorted(REASONS) == REFUSED  # every probe the control expects to escape
    records, lookup = Records(), RecordingLookup({})
    with probe_target() as port:
        proxy = open_proxy(loop, tmp_path, acceptance_allowlist(port), records,
                           dict(ACCEPTANCE_RESOLVE), lookup=lookup)  # fmt: skip
        try:
            probes = allowlist_probes(tmp_path, proxy.listener.socket_path, port)
        finally:
            proxy.stop()
    assert sorted(probes) == sorted(["allow_listed", *REFUSED])
    assert {n: c["status"] for n, c in probes.items()} == dict.fromkeys(probes, "pass")
    for name, reason in REASONS.items():
        assert reason in probes[name]["detail"]
    assert lookup.asked == []  # no name, listed or not, went to a resolver
    seen = records.wait(len(probes))
    refused = sorted(r.reason for r in seen if not r.allowed and r.reason in REASONS.values())
    assert refused == sorted(REASONS.values())
    [looked] = [r for r in seen if r.destination.startswith("lookup-")]
    assert (looked.reason, looked.address) == ("not_listed", None)  # refused, never resolved
    hellos = [r for r in seen if r.reason.startswith("sni_")]
    assert all(r.bytes_up == 0 for r in hellos)  # nothing of a refused hello went on


def test_through_the_open_relay_each_probe_reaches_the_target(tmp_path: Path) -> None:
    with probe_target() as port, open_relay(tmp_path / "relay", port) as relay:
        probes = allowlist_probes(tmp_path, relay, port)
    assert probes["allow_listed"]["status"] == "pass"
    assert {n: probes[n]["status"] for n in REFUSED} == dict.fromkeys(REFUSED, "fail")
    # What arrived: both requests of the smuggled pair, each ClientHello.
    assert "2 request line(s)" in probes["allow_smuggle"]["detail"]
    for name in ("allow_sni_mismatch", "allow_sni_missing"):
        assert "the peer's answer: HTTP/1.1 200 OK" in probes[name]["detail"], probes[name]
