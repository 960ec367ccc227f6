"""A workspace with an egress allowlist, through the operator's commands on real
rootless Podman: mode set validates and stores the allowlist, acceptance classifies its
writers `limited-allowlist` (the harness's allowlist checks pass inside, and the
isolation control sees the same checks fail uncontained), and egress check names the
entry that allows a destination."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import codes, make_checkout, wp, write_config
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.control import EXPECTED_NETWORK_ESCAPES, run_control
from writerpool.runtime.local import LocalPodman

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

# The harness's allowlist probes that must be refused inside (docs/security.md).
ALLOW_PROBES = (
    "allow_unlisted", "allow_private", "allow_loopback", "allow_literal", "allow_lookup",
    "allow_sni_mismatch", "allow_sni_missing", "allow_smuggle",
)  # fmt: skip
ALLOW = "mirror.corp.test,*.cdn.corp.test:8443,http://plain.corp.test,corp,10.9.9.0/24"
# egress check resolves as the proxy does: the names it finds allowed resolve, through
# [egress.resolve], into the listed range (the machine's resolver knows no .test name).
EGRESS = """
[egress.sets.corp]
hosts = ["npm.corp.test"]

[egress.resolve]
"mirror.corp.test" = ["10.9.8.7"]
"a.cdn.corp.test" = ["10.9.9.1"]
"npm.corp.test" = ["10.9.9.2"]
"plain.corp.test" = ["10.9.9.3"]
"""


@pytest.fixture
def configured(tmp_path: Path, image_pin: Path) -> Path:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    write_config(checkout)
    config = Paths.from_env().config_file
    config.write_text(config.read_text() + EGRESS)
    return checkout


def finding(report: dict[str, Any], code: str) -> dict[str, Any]:
    found = [f for f in report["findings"] if f["code"] == code]
    assert found, report
    return dict(found[0])


def test_bad_allowlists_are_refused_with_stable_codes_and_store_nothing(
    configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = Paths.from_env()
    # npm configured only with a registry that is no http(s) URL: host-npm names no host.
    monkeypatch.setenv("npm_config_registry", "file:///srv/npm-mirror")
    cases = {
        "localhost": "allow_set_unknown",
        "x_y.corp.test": "allow_entry_invalid",
        "mirror.corp.test,https://x.corp.test": "allow_entry_invalid",
        "nosuchset": "allow_set_unknown",
        "host-npm": "allow_set_empty",
    }
    for words, code in cases.items():
        exit_code, report = wp("mode", "set", "demo", "container", "--profiles", "code",
                               "--allow", words, "--apply")  # fmt: skip
        assert (exit_code, codes(report)) == (1, [code]), report
        if code == "allow_set_empty":  # it says what to do
            assert "list your registry's host instead" in report["findings"][0]["message"]
    exit_code, report = wp("mode", "set", "demo", "container", "--profiles", "code",
                           "--network", "none", "--allow", "a.corp.test", "--apply")  # fmt: skip
    assert (exit_code, codes(report)) == (1, ["allow_network_unsupported"])
    assert not paths.modes_file.exists()


def test_an_allowlist_writer_is_accepted_as_limited_allowlist(configured: Path) -> None:
    wp("control", "--apply", check=True)
    _, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--allow", ALLOW,
                   "--apply", check=True)  # fmt: skip
    accepted = finding(report, "writer_accepted")
    print("mode set --apply:", accepted["message"])
    assert str(accepted["message"]).startswith("accepted as limited-allowlist; network provider")
    probes = accepted["data"]["networkChecks"]
    for name, status in probes.items():
        print(f"network check {name}: {status}")
    # Every allowlist probe, each refused inside with its own reason (a probe passes only
    # then), beside the listed name reached and the direct ways out closed.
    expected = ["allow_listed", *ALLOW_PROBES, "net_direct", "net_host_loopback"]
    assert {n: probes.get(n) for n in expected} == dict.fromkeys(expected, "pass")
    _, status = wp("writer", "status", "demo-w1")
    assert status["data"]["writers"][0]["networkClass"] == "limited-allowlist"
    _, shown = wp("mode", "show", "demo", check=True)
    stored = finding(shown, "mode_stored")
    assert f"--allow '{ALLOW}'" in str(stored["data"]["command"])
    checks = {
        "mirror.corp.test": ("egress_check_denied", "address_private"),
        "a.cdn.corp.test:8443": ("egress_check_allowed", "*.cdn.corp.test:8443"),
        "npm.corp.test": ("egress_check_allowed", "npm.corp.test"),
        "http://plain.corp.test": ("egress_check_allowed", "http://plain.corp.test"),
        "plain.corp.test": ("egress_check_denied", "scheme_not_listed"),
        "other.corp.test": ("egress_check_denied", "not_listed"),
    }
    for target, (code, detail) in checks.items():
        exit_code, checked = wp("egress", "check", "demo", target)
        [only] = checked["findings"]
        print(f"egress check demo {target}:", only["message"])
        assert (only["code"], exit_code) == (code, 0 if code == "egress_check_allowed" else 1)
        assert detail in (only["data"].get("entry"), only["data"].get("reason"))
    assert "(from set corp)" in json.dumps(wp("egress", "check", "demo", "npm.corp.test")[1])
    # Without an allowlist again: the writer is made limited (and re-accepted as such).
    _, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--apply",
                   check=True)  # fmt: skip
    assert "accepted as limited;" in finding(report, "writer_accepted")["message"]
    assert "egress_check_denied" in codes(wp("egress", "check", "demo", "npm.corp.test")[1])


class Recorded(LocalPodman):
    """This machine's host, keeping what each uncontained run printed."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[bytes] = []

    def run_uncontained(self, program: Path, env: dict[str, str]) -> bytes:
        self.outputs.append(super().run_uncontained(program, env))
        return self.outputs[-1]


def test_the_control_sees_the_allowlist_checks_fail_uncontained(tmp_path: Path) -> None:
    host = Recorded()
    report = run_control(Paths.from_env(), host)
    assert report.codes() == ["isolation_control_passed"]
    network = json.loads(host.outputs[0])["networkChecks"]
    for name, check in sorted(network.items()):
        print(f"control {name}: {check['status']} ({check['detail']})")
    assert network["allow_listed"]["status"] == "pass"
    assert set(ALLOW_PROBES) <= set(EXPECTED_NETWORK_ESCAPES)
    for name in EXPECTED_NETWORK_ESCAPES:
        assert network[name]["status"] == "fail", (name, network[name])
    # Each got through the open relay, and says what arrived at the probe target.
    for name in ALLOW_PROBES:
        assert "the peer's answer" in network[name]["detail"], (name, network[name])
    assert "2 request line(s)" in network["allow_smuggle"]["detail"]
