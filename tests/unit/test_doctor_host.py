"""Doctor's host checks over recorded `podman info`/`podman version` output and host
facts: every failure mode measured on these hosts gets its named finding."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from writerpool.config.paths import Paths
from writerpool.doctor import CheckResult, blocking_failures
from writerpool.doctor import run_checks as run_all_checks
from writerpool.doctor.render import render_json
from writerpool.errors import WriterpoolError
from writerpool.runtime.info import (
    BinaryFacts,
    DeviceFacts,
    HostFacts,
    RuntimeTrial,
    cgroup_layout,
    parse_info,
    parse_version,
    version_tuple,
)

DATA = Path(__file__).parent / "data"
SETUID_ROOT = 0o104755
CHAR_DEVICE = 0o020000
PIN = "19e0bf59b0faa183707613c9909ebb372e103e53d60d564a72da90e5b6ab195b"


def info_json(name: str = "podman-info-runc-hybrid.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


def recorded_facts(info: dict[str, Any] | None = None, **changes: Any) -> HostFacts:
    """The writerpool account on this host, as recorded: Podman 4.3.1, runc, overlay,
    slirp4netns, hybrid cgroups, a full subuid range, /dev/net/tun 0666."""
    subids = (DATA / "subuid.txt").read_text()
    facts = HostFacts(
        uid=1001,
        user="writerpool",
        gids=frozenset({1001}),
        binaries={
            "podman": BinaryFacts("/usr/bin/podman", 0o100755, 0),
            "newuidmap": BinaryFacts("/usr/bin/newuidmap", SETUID_ROOT, 0),
            "newgidmap": BinaryFacts("/usr/bin/newgidmap", SETUID_ROOT, 0),
            "slirp4netns": BinaryFacts("/usr/bin/slirp4netns", 0o100755, 0),
            "runc": BinaryFacts("/usr/sbin/runc", 0o100755, 0),
        },
        podman_version=parse_version((DATA / "podman-version-4.3.1.json").read_text()),
        podman_info=parse_info(json.dumps(info if info is not None else info_json())),
        subuid=subids,
        subgid=subids,
        tun=DeviceFacts(CHAR_DEVICE | 0o666, 0, 0),
        cgroups=cgroup_layout((DATA / "proc-mounts-hybrid.txt").read_text()),
    )
    return replace(facts, **changes)


def v2_info() -> dict[str, Any]:
    info = info_json()
    info["host"]["cgroupVersion"] = "v2"
    info["host"]["cgroupControllers"] = ["cpuset", "cpu", "io", "memory", "pids"]
    return info


def run_checks(paths: Paths, facts: HostFacts) -> list[CheckResult]:
    """The built-in checks only; the extension checks have tests of their own."""
    return run_all_checks(paths, facts, extra=())


def check(results: list[CheckResult], check_id: str) -> list[CheckResult]:
    return [r for r in results if r.id == check_id]


def one(results: list[CheckResult], check_id: str) -> CheckResult:
    found = check(results, check_id)
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def paths() -> Paths:
    return Paths.from_env()  # under tmp_path (the autouse isolation fixture)


def test_recorded_host_has_no_error_and_reports_what_it_found(paths: Paths) -> None:
    results = run_checks(paths, recorded_facts())
    assert [r for r in results if r.severity == "error"] == []
    assert one(results, "podman_usable").data["version"] == "4.3.1"
    runtime = one(results, "oci_runtime")
    assert runtime.severity == "ok" and runtime.data["runtime"] == "runc"
    assert one(results, "storage_driver").data["driver"] == "overlay"
    assert {r.data["kind"] for r in check(results, "subid_ranges")} == {"subuid", "subgid"}
    assert one(results, "tun_device").severity == "ok"


def test_crun_on_hybrid_cgroups_is_named_from_podman_info(paths: Paths) -> None:
    # Recorded with crun 1.8.1 as the runtime: Podman names it by path, crun by version.
    facts = recorded_facts(info_json("podman-info-crun-hybrid.json"))
    assert facts.cgroups == "hybrid"
    result = one(run_checks(paths, facts), "oci_runtime")
    assert result.severity == "error" and result.blocking
    assert "cgroups in hybrid mode not supported" in result.message
    assert result.data == {"runtime": "crun", "tried": False}
    assert 'runtime = "runc"' in result.remedy and "[engine]" in result.remedy
    assert "~/.config/containers/containers.conf" in result.remedy
    assert "scripts/bootstrap-host" in result.remedy


def test_crun_failing_a_trial_container_is_recognised_by_its_message(paths: Paths) -> None:
    stderr = (DATA / "podman-run-crun-hybrid.stderr.txt").read_text()
    trial = RuntimeTrial(PIN, ok=False, stderr=stderr)
    facts = recorded_facts(info_json("podman-info-crun-hybrid.json"), runtime_trial=trial)
    result = one(run_checks(paths, facts), "oci_runtime")
    assert result.severity == "error"
    assert result.data == {"runtime": "crun", "tried": True}
    assert "crun fails every container" in result.message


def test_crun_on_unified_cgroups_is_fine(paths: Paths) -> None:
    info = v2_info()
    info["host"]["ociRuntime"] = info_json("podman-info-crun-hybrid.json")["host"]["ociRuntime"]
    facts = recorded_facts(info, cgroups="v2")
    assert one(run_checks(paths, facts), "oci_runtime").severity == "ok"


def test_another_trial_failure_is_an_error_without_the_crun_advice(paths: Paths) -> None:
    trial = RuntimeTrial(PIN, ok=False, stderr="Error: something else broke")
    result = one(run_checks(paths, recorded_facts(runtime_trial=trial)), "oci_runtime")
    assert result.severity == "error"
    assert "something else broke" in result.message and "crun" not in result.remedy


def test_a_passing_trial_container_is_reported(paths: Paths) -> None:
    trial = RuntimeTrial(PIN, ok=True)
    result = one(run_checks(paths, recorded_facts(runtime_trial=trial)), "oci_runtime")
    assert result.severity == "ok" and result.data["tried"] is True


def test_vfs_storage_is_a_warning_with_overlay_and_reset_remedy(paths: Paths) -> None:
    info = info_json()
    info["store"]["graphDriverName"] = "vfs"
    result = one(run_checks(paths, recorded_facts(info)), "storage_driver")
    assert result.severity == "warning"
    assert "copies the whole image" in result.message
    assert 'driver = "overlay"' in result.remedy and "podman system reset" in result.remedy
    assert "~/.config/containers/storage.conf" in result.remedy


def test_tun_device_0600_is_an_error_for_slirp4netns(paths: Paths) -> None:
    facts = recorded_facts(tun=DeviceFacts(CHAR_DEVICE | 0o600, 0, 0))
    results = run_checks(paths, facts)
    result = one(results, "tun_device")
    assert result.severity == "error" and result.blocking
    assert "0600" in result.message and "slirp4netns" in result.message
    assert "chmod 0666 /dev/net/tun" in result.remedy
    # The fixed device path survives the report's path scrubbing; it is the remedy.
    finding = next(
        f for f in json.loads(render_json(results))["findings"] if f["code"] == "tun_device"
    )
    assert "chmod 0666 /dev/net/tun" in finding["remedy"]


def test_tun_device_owned_by_the_user_or_missing(paths: Paths) -> None:
    own = recorded_facts(tun=DeviceFacts(CHAR_DEVICE | 0o600, 1001, 1001))
    assert one(run_checks(paths, own), "tun_device").severity == "ok"
    missing = one(run_checks(paths, recorded_facts(tun=None)), "tun_device")
    assert missing.severity == "error" and "missing" in missing.message


def test_running_as_root_is_an_error_for_container_mode(paths: Paths) -> None:
    info = info_json()
    info["host"]["security"]["rootless"] = False
    results = run_checks(paths, recorded_facts(info, uid=0, user="root"))
    result = one(results, "rootless_user")
    assert result.severity == "error" and result.blocking and "root" in result.message
    # Root needs no subordinate ranges or setuid helpers; only the root finding speaks.
    assert check(results, "subid_ranges") == [] and check(results, "idmap_helpers") == []


def test_missing_subuid_range_is_an_error_naming_the_user(paths: Paths) -> None:
    info = info_json()
    for key in ("uidmap", "gidmap"):  # what Podman reports without ranges
        info["host"]["idMappings"][key] = info["host"]["idMappings"][key][:1]
    facts = recorded_facts(info, subuid="someoneelse:100000:65536\n")
    results = check(run_checks(paths, facts), "subid_ranges")
    by_kind = {r.data.get("kind"): r for r in results}
    assert by_kind["subuid"].severity == "error" and by_kind["subuid"].blocking
    assert "no range for writerpool" in by_kind["subuid"].message
    assert "usermod --add-subuids" in by_kind["subuid"].remedy
    assert by_kind["subgid"].severity == "ok"
    assert len(results) == 2  # no extra "migrate" hint on top of the error


def test_subuid_file_missing_and_short_range(paths: Paths) -> None:
    gone = check(run_checks(paths, recorded_facts(subuid=None)), "subid_ranges")
    assert [r.severity for r in gone] == ["error", "ok"]
    short = check(run_checks(paths, recorded_facts(subgid="1001:200000:1000\n")), "subid_ranges")
    assert [r.severity for r in short] == ["ok", "warning"]
    assert short[1].data["count"] == 1000


def test_ranges_on_file_but_unused_by_podman_ask_for_migrate(paths: Paths) -> None:
    info = info_json()
    info["host"]["idMappings"]["uidmap"] = info["host"]["idMappings"]["uidmap"][:1]
    results = check(run_checks(paths, recorded_facts(info)), "subid_ranges")
    assert results[-1].severity == "warning" and "podman system migrate" in results[-1].remedy


def test_idmap_helpers_missing_or_without_privilege(paths: Paths) -> None:
    binaries = dict(recorded_facts().binaries)
    binaries.pop("newuidmap")
    binaries["newgidmap"] = BinaryFacts("/usr/bin/newgidmap", 0o100755, 0)
    results = check(run_checks(paths, recorded_facts(binaries=binaries)), "idmap_helpers")
    assert [(r.data["helper"], r.severity) for r in results] == [
        ("newuidmap", "error"),
        ("newgidmap", "error"),
    ]
    assert "apt-get install uidmap" in results[0].remedy
    caps = dict(
        binaries,
        newuidmap=BinaryFacts("/usr/bin/newuidmap", 0o100755, 0, True),
        newgidmap=BinaryFacts("/usr/bin/newgidmap", SETUID_ROOT, 0),
    )
    assert {
        r.severity for r in check(run_checks(paths, recorded_facts(binaries=caps)), "idmap_helpers")
    } == {"ok"}


def test_podman_4_3_1_has_no_pasta_and_uses_slirp4netns(paths: Paths) -> None:
    result = one(run_checks(paths, recorded_facts()), "network_helper")
    assert result.severity == "ok"
    assert "pasta is missing" in result.message and "4.3.1" in result.message
    assert "slirp4netns is used" in result.message and "not limited" in result.message
    assert result.data["helper"] == "slirp4netns"


def test_newer_podman_uses_pasta_when_installed(paths: Paths) -> None:
    info = info_json()
    info["version"]["Version"] = "4.9.3"
    info["host"]["pasta"] = {"executable": "/usr/bin/pasta", "package": "passt", "version": "x"}
    assert one(run_checks(paths, recorded_facts(info)), "network_helper").data["helper"] == "pasta"
    del info["host"]["pasta"]
    result = one(run_checks(paths, recorded_facts(info)), "network_helper")
    assert "pasta is not installed" in result.message and result.data["helper"] == "slirp4netns"


def test_no_network_helper_at_all_is_a_warning(paths: Paths) -> None:
    info = info_json()
    del info["host"]["slirp4netns"]
    binaries = {k: v for k, v in recorded_facts().binaries.items() if k != "slirp4netns"}
    results = run_checks(paths, recorded_facts(info, binaries=binaries))
    assert one(results, "network_helper").severity == "warning"
    assert check(results, "tun_device") == []  # no user-mode network to serve


def test_hybrid_cgroups_warn_that_limits_are_ignored(paths: Paths) -> None:
    facts = recorded_facts()
    assert not facts.limits_enforced
    result = one(run_checks(paths, facts), "cgroup_limits")
    assert result.severity == "warning" and "limits" in result.message
    assert result.data == {"layout": "hybrid", "limits": False}


def test_cgroup_v2_with_delegated_controllers_applies_limits(paths: Paths) -> None:
    facts = recorded_facts(v2_info(), cgroups="v2")
    assert facts.limits_enforced
    assert one(run_checks(paths, facts), "cgroup_limits").severity == "ok"
    info = v2_info()
    info["host"]["cgroupControllers"] = ["cpu"]
    undelegated = one(run_checks(paths, recorded_facts(info, cgroups="v2")), "cgroup_limits")
    assert undelegated.severity == "warning" and undelegated.data["missing"] == ["memory", "pids"]


def test_podman_missing_or_failing(paths: Paths) -> None:
    absent = recorded_facts(podman_version=None, podman_info=None, binaries={})
    results = run_checks(paths, absent)
    result = one(results, "podman_usable")
    assert result.severity == "error" and "not installed" in result.message
    # Nothing else pretends to know what Podman would do.
    for check_id in ("oci_runtime", "storage_driver", "network_helper", "cgroup_limits"):
        assert check(results, check_id) == []
    broken = recorded_facts(podman_info=None, podman_error="cannot set up namespace")
    result = one(run_checks(paths, broken), "podman_usable")
    assert "4.3.1" in result.message and "cannot set up namespace" in result.message
    assert "podman system migrate" not in result.remedy


def test_a_layer_held_by_the_rootless_namespace_names_podman_system_migrate(paths: Paths) -> None:
    # The lines Podman 4.3 printed on every command once a removed layer stayed mounted.
    error = (
        'time="2026-12-06T23:41:07Z" level=warning msg="Found incomplete layer '
        '\\"0c8f…\\", deleting it"\nError: unlinkat /home/wp/.local/share/containers/'
        "storage/overlay/0c8f…/merged: device or resource busy"
    )
    wedged = recorded_facts(podman_info=None, podman_error=error)
    result = one(run_checks(paths, wedged), "podman_usable")
    assert result.severity == "error" and result.blocking
    assert "device or resource busy" in result.message
    assert "`podman system migrate`" in result.remedy and "clones are kept" in result.remedy


def test_blocking_failures_scope_by_workspace_profile_and_network(paths: Paths) -> None:
    results = [
        CheckResult("tun_device", "error", "host", "m", "r", blocking=True),
        CheckResult("workspace_checkout", "error", "workspace/a", "m", "r", blocking=True),
        CheckResult("workspace_checkout", "error", "workspace/b", "m", "r", blocking=True),
        CheckResult("profile_provider", "error", "profile/code", "m", "r", blocking=True),
        CheckResult("storage_driver", "warning", "podman", "m", "r"),
        CheckResult("profile_provider", "error", "profile/review", "m", "r"),
    ]
    chosen = blocking_failures(results, workspace="a", profiles=["code"])
    assert [(r.id, r.subject) for r in chosen] == [
        ("tun_device", "host"),
        ("workspace_checkout", "workspace/a"),
        ("profile_provider", "profile/code"),
    ]
    offline = blocking_failures(results, workspace="a", network="none")
    assert [r.subject for r in offline] == ["workspace/a"]


def test_extra_checks_run_after_the_built_in_ones(paths: Paths) -> None:
    def isolation(ctx: Any) -> list[CheckResult]:
        return [
            CheckResult(
                "isolation_control_required",
                "error",
                "control",
                "none recorded",
                "run writerpool control --apply",
            )
        ]

    results = run_all_checks(paths, recorded_facts(), extra=[isolation])
    assert results[-1].id == "isolation_control_required"


def test_check_results_need_registered_ids_and_remedies() -> None:
    with pytest.raises(ValueError, match="unregistered"):
        CheckResult("no_such_check", "ok", "host", "m")
    with pytest.raises(ValueError, match="remedy"):
        CheckResult("tun_device", "error", "host", "m")


def test_cgroup_layouts_are_classified_from_mounts() -> None:
    assert cgroup_layout((DATA / "proc-mounts-hybrid.txt").read_text()) == "hybrid"
    assert cgroup_layout("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n") == "v2"
    assert cgroup_layout("cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n") == "v1"
    assert cgroup_layout("proc /proc proc rw 0 0\n") == "unknown"


def test_podman_info_parsing_tolerates_nulls_and_rejects_garbage() -> None:
    info = info_json()
    info["host"]["cgroupControllers"] = None
    info["host"]["idMappings"] = {"uidmap": None, "gidmap": None}
    parsed = parse_info(json.dumps(info))
    assert parsed.host.cgroup_controllers == () and parsed.host.id_mappings.uidmap == ()
    assert parsed.host.oci_runtime is not None and parsed.host.oci_runtime.kind == "runc"
    with pytest.raises(WriterpoolError) as caught:
        parse_info('{"host": {}}')
    assert caught.value.code == "podman_unavailable"


def test_version_tuples() -> None:
    assert version_tuple("4.3.1") == (4, 3, 1)
    assert version_tuple("4.4.0-rc1") == (4, 4, 0)
    assert version_tuple("5.0-dev") == (5, 0, 0)
    assert version_tuple("garbage") == (0, 0, 0)


LIMITED = """
import json, resource, sys
soft, hard = (int(v) for v in sys.argv[1:3])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
from writerpool import fdlimit
from writerpool.doctor.host import server_descriptors
(result,) = server_descriptors(None)
print(json.dumps({"raised": fdlimit.raise_to_hard(), "severity": result.severity,
                  "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
"""


def _under_limits(soft: int, hard: int) -> dict[str, Any]:
    # In a child: a lowered hard limit cannot be raised again in this process.
    done = subprocess.run([sys.executable, "-c", LIMITED, str(soft), str(hard)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_the_server_raises_its_soft_descriptor_limit_to_the_hard_one() -> None:
    from writerpool import fdlimit

    hard = fdlimit.needed() + 100
    assert _under_limits(256, hard) == {"raised": hard, "severity": "ok", "soft": hard}


def test_doctor_warns_when_the_hard_descriptor_limit_is_below_a_full_pools_need() -> None:
    out = _under_limits(200, 1000)
    assert out == {"raised": 1000, "severity": "warning", "soft": 1000}
