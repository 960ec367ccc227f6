"""Doctor and the container spec on the Podman releases of current Debian: 4.3.1 (Debian 12,
recorded here) and 5.4.2 (Debian 13: recorded on the Debian 13 test host on this machine's
hybrid cgroups, and a reconstruction of a Debian 13 host on unified cgroup v2, see
data/README-doctor.md), and what Podman 6 removes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_doctor_host import DATA, PIN, check, info_json, recorded_facts, run_checks
from writerpool.config.paths import Paths
from writerpool.doctor.engine import network_helper_name
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.inspect import tool_answer
from writerpool.proc import CommandFailed
from writerpool.runtime.info import BinaryFacts, HostFacts, cgroup_layout, parse_info, parse_version
from writerpool.runtime.spec import ContainerSpec, Limits

PODMAN5 = "podman-info-5.4.2-debian13-reconstructed.json"
PODMAN5_VERSION = "podman-version-5.4.2-reconstructed.json"
RECORDED5 = "podman-info-5.4.2-debian13-hybrid.json"
RECORDED5_VERSION = "podman-version-5.4.2-debian13.json"
# What Podman 5 printed before its error on the Debian 13 test host (hybrid cgroups): the
# same warning opens every command's stderr there.
CGROUPS_V1_STDERR = (
    b'time="2026-12-06T05:08:24Z" level=warning msg="Using cgroups-v1 which is deprecated in '
    b"favor of cgroups-v2 with Podman v5 and will be removed in a future version. Set "
    b'environment variable `PODMAN_IGNORE_CGROUPSV1_WARNING` to hide this warning."\n'
    b"Error: " + b"a" * 64 + b": image not known\n"
)
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


@pytest.fixture
def paths() -> Paths:
    return Paths.from_env()  # under tmp_path (the autouse isolation fixture)


def debian13_facts(info: dict[str, Any] | None = None) -> HostFacts:
    """A bootstrapped account on Debian 13: Podman 5.4.2, crun, pasta, unified cgroup v2."""
    base = recorded_facts(info if info is not None else info_json(PODMAN5))
    binaries = {
        **base.binaries,
        "pasta": BinaryFacts("/usr/bin/pasta", 0o100755, 0),
        "crun": BinaryFacts("/usr/bin/crun", 0o100755, 0),
    }
    return replace(
        base,
        binaries=binaries,
        podman_version=parse_version((DATA / PODMAN5_VERSION).read_text()),
        cgroups=cgroup_layout(V2_MOUNTS),
    )


def recorded5_facts() -> HostFacts:
    """Debian 13's Podman 5.4.2 as recorded on the Debian 13 test host (scripts/testhost
    --debian 13) on this machine's hybrid cgroups: runc, pasta, cgroupfs."""
    base = recorded_facts(info_json(RECORDED5))
    binaries = {**base.binaries, "pasta": BinaryFacts("/usr/bin/pasta", 0o100755, 0)}
    version = parse_version((DATA / RECORDED5_VERSION).read_text())
    return replace(base, binaries=binaries, podman_version=version)


def one(results: list[Any], check_id: str) -> Any:
    found = check(results, check_id)
    assert len(found) == 1, found
    return found[0]


def test_the_reconstructed_podman5_info_parses_with_the_fields_doctor_reads() -> None:
    info = parse_info(json.dumps(info_json(PODMAN5)))
    assert info.version.version == "5.4.2"
    assert info.host.cgroup_version == "v2"
    assert info.host.pasta is not None and info.host.pasta.executable == "/usr/bin/pasta"
    assert info.host.oci_runtime is not None and info.host.oci_runtime.kind == "crun"
    assert info.store.graph_driver_name == "overlay"


def test_the_recorded_podman5_info_has_the_fields_the_reconstruction_gave_doctor() -> None:
    recorded, reconstructed = (parse_info(json.dumps(info_json(n))) for n in (RECORDED5, PODMAN5))
    assert recorded.version.version == reconstructed.version.version == "5.4.2"
    assert recorded.host.pasta is not None and reconstructed.host.pasta is not None
    assert recorded.host.pasta.executable == reconstructed.host.pasta.executable
    assert recorded.host.security.rootless and recorded.store.graph_driver_name == "overlay"
    # This machine's hybrid layout, where Podman 5 reports v1 and runc runs the containers.
    assert recorded.host.cgroup_version == "v1" and recorded.host.cgroup_controllers == ()
    assert recorded.host.oci_runtime is not None and recorded.host.oci_runtime.kind == "runc"


def test_podman5_as_recorded_on_hybrid_cgroups_warns_of_v1_and_gives_writers_pasta(
    paths: Paths,
) -> None:
    facts = recorded5_facts()
    results = run_checks(paths, facts)
    assert [r for r in results if r.severity == "error"] == []
    podman = one(results, "podman_usable")
    assert (podman.severity, podman.data["version"]) == ("warning", "5.4.2")
    assert "deprecates cgroup v1" in podman.message and "cgroup v2" in podman.remedy
    assert network_helper_name(facts) == "pasta"
    assert one(results, "network_helper").data["helper"] == "pasta"
    assert one(results, "oci_runtime").data["runtime"] == "runc"
    assert one(results, "cgroup_limits").severity == "warning" and not facts.limits_enforced


def test_debian13_podman5_has_no_errors_pasta_and_enforced_limits(paths: Paths) -> None:
    facts = debian13_facts()
    results = run_checks(paths, facts)
    errors = [r for r in results if r.severity == "error"]
    assert errors == []
    podman = one(results, "podman_usable")
    assert (podman.severity, podman.data["version"]) == ("ok", "5.4.2")
    assert network_helper_name(facts) == "pasta"
    assert one(results, "network_helper").data["helper"] == "pasta"
    limits = one(results, "cgroup_limits")
    assert limits.severity == "ok" and limits.data["limits"] is True
    assert facts.limits_enforced
    runtime = one(results, "oci_runtime")
    assert runtime.severity == "ok" and runtime.data["runtime"] == "crun"


def test_podman5_without_delegated_controllers_warns_and_applies_no_limits(paths: Paths) -> None:
    info = info_json(PODMAN5)
    info["host"]["cgroupControllers"] = ["memory", "pids"]  # no user delegation of cpu
    facts = debian13_facts(info)
    assert not facts.limits_enforced
    limits = one(run_checks(paths, facts), "cgroup_limits")
    assert limits.severity == "warning" and limits.data["missing"] == ["cpu"]


def test_debian12_podman_warns_it_is_older_than_well_supported_and_explains_podman6(
    paths: Paths,
) -> None:
    result = one(run_checks(paths, recorded_facts()), "podman_usable")
    assert result.severity == "warning" and result.data["version"] == "4.3.1"
    assert "older than 4.4" in result.message and "slirp4netns" in result.message
    assert "Podman 6 removes slirp4netns" in result.message and "cgroup v1" in result.message
    assert not result.blocking or result.severity != "error"


def test_podman5_on_hybrid_cgroups_warns_that_podman6_needs_cgroup_v2(paths: Paths) -> None:
    facts = replace(debian13_facts(), cgroups="hybrid")
    result = one(run_checks(paths, facts), "podman_usable")
    assert result.severity == "warning"
    assert "deprecates cgroup v1" in result.message and "cgroup v2" in result.remedy


def test_podman_older_than_4_is_unsupported(paths: Paths) -> None:
    old = parse_version(json.dumps({"Client": {"Version": "3.4.4", "APIVersion": "3.4.4"}}))
    info = info_json()
    info["version"]["Version"] = "3.4.4"
    facts = recorded_facts(info, podman_version=old)
    result = one(run_checks(paths, facts), "podman_usable")
    assert result.severity == "warning" and "does not support" in result.message


def test_the_container_spec_asks_for_pasta_and_limits_as_podman5_takes_them() -> None:
    spec = ContainerSpec(
        image_id=PIN, name="writerpool-demo-w1", network="pasta",
        limits=Limits(memory="2g", cpus=1.5, pids=512),
    )  # fmt: skip
    argv = spec.run_argv(["true"])
    at = argv.index("--network")
    assert argv[at + 1] == "pasta"
    assert argv[argv.index("--memory") + 1] == "2g"
    assert argv[argv.index("--pids-limit") + 1] == "512"
    # Every flag is one Podman 4.3 and 5.x both document for `podman run`.
    flags = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    assert flags <= {
        "--rm", "--pull", "--name", "--userns", "--cap-drop", "--security-opt", "--read-only",
        "--read-only-tmpfs", "--tmpfs", "--env", "--network", "--hostname", "--log-driver",
        "--workdir", "--label", "--mount", "--memory", "--cpus", "--pids-limit",
    }  # fmt: skip


def test_bootstrap_host_installs_passt_only_for_a_podman_with_pasta() -> None:
    text = (Path(__file__).resolve().parents[2] / "scripts" / "bootstrap-host").read_text()
    assert 'dpkg --compare-versions "$podman_version" ge 4.4' in text
    assert "apt-get install -y -q --no-install-recommends passt" in text


def test_a_podman5_failure_on_cgroup_v1_is_named_by_its_error_not_the_warning_before_it() -> None:
    failed = CommandFailed(["podman", "run"], 125, b"", CGROUPS_V1_STDERR)
    assert failed.message.endswith(": image not known") and "cgroups-v1" not in failed.message
    with pytest.raises(WriterpoolError) as exc:
        tool_answer(b"", CGROUPS_V1_STDERR, 125, "writer_inspect_failed")
    assert "image not known" in exc.value.message and "cgroups-v1" not in exc.value.message
