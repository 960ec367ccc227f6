"""Writers on real rootless Podman and real git: provisioning, control, acceptance, a
busy writer's lease and an unreachable Podman, driven through the CLI as an operator
would. (A lease freed by SIGKILL and the fence's own logic are unit tests:
tests/unit/test_lease_holder_killed.py, tests/unit/test_fence.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.writers_support import (
    codes,
    git,
    make_checkout,
    podman,
    snapshot_tree,
    wp,
    write_config,
    writer_containers,
)
from tests.support.images import remove_images
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.accept import accept
from writerpool.pool.acceptance.control import run_control
from writerpool.pool.provision.reconcile import operate
from writerpool.runtime.hosts import open_host
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path / "checkout", commits=5, origin="https://example.invalid/r.git")


@pytest.fixture
def configured(checkout: Path, image_pin: Path) -> Path:
    write_config(checkout)
    return checkout


@pytest.fixture
def accepted(configured: Path) -> Path:
    wp("control", "--apply", check=True)
    wp("mode", "set", "demo", "container", "--profiles", "code", "--apply", check=True)
    return configured


def test_dry_run_leaves_nothing_behind(configured: Path, isolated_env: Path) -> None:
    before_home = snapshot_tree(isolated_env)
    before_repo = snapshot_tree(configured)
    code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--writers", "2")
    assert code == 0, report
    assert "mode_planned" in codes(report)
    assert codes(report).count("writer_planned") == 2
    # Nothing but the audit line of the command itself (every command is audited).
    audit = ".local/state/writerpool"
    after_home = {k: v for k, v in snapshot_tree(isolated_env).items() if k != audit}
    assert set(after_home) - set(before_home) == {f"{audit}/audit.log", f"{audit}/audit.log.lock"}
    assert {k: after_home[k] for k in before_home if k != audit} == {
        k: v for k, v in before_home.items() if k != audit
    }
    assert snapshot_tree(configured) == before_repo
    assert writer_containers("demo-w1") == [] and writer_containers("demo-w2") == []


def test_apply_provisions_full_independent_clones(configured: Path) -> None:
    wp("control", "--apply", check=True)
    code, report = wp(
        "mode", "set", "demo", "container", "--profiles", "code", "--writers", "2", "--apply"
    )
    assert code == 0, report
    assert codes(report).count("writer_provisioned") == 2
    assert codes(report).count("writer_accepted") == 2
    operator_inodes = {
        p.stat().st_ino for p in (configured / ".git" / "objects").rglob("*") if p.is_file()
    }
    paths = Paths.from_env()
    for name in ("demo-w1", "demo-w2"):
        clone = paths.writer_dir(name) / "clone"
        assert git(clone, "rev-list", "--count", "main") == git(
            configured, "rev-list", "--count", "main"
        )
        clone_inodes = {
            p.stat().st_ino for p in (clone / ".git" / "objects").rglob("*") if p.is_file()
        }
        assert not operator_inodes & clone_inodes
        assert git(clone, "remote", "get-url", "origin") == "https://example.invalid/r.git"
        assert not any((clone / ".git" / "hooks").iterdir())
    code, listing = wp("writer", "list")
    assert [w["phase"] for w in listing["data"]["writers"]] == ["ready", "ready"]


def test_origin_with_userinfo_is_not_copied(tmp_path: Path, image_pin: Path) -> None:
    repo = make_checkout(tmp_path / "co", origin="https://user:s3cret@example.invalid/r.git")
    write_config(repo)
    code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--apply")
    assert "remote_url_refused" in codes(report)
    assert "s3cret" not in json.dumps(report)
    clone = Paths.from_env().writer_dir("demo-w1") / "clone"
    assert "origin" not in git(clone, "remote").split()


def test_isolation_control_passes_here_and_fails_when_blind(tmp_path: Path) -> None:
    paths = Paths.from_env()
    report = run_control(paths, open_host())
    assert report.codes() == ["isolation_control_passed"]
    assert not list(Path.home().glob(".writerpool-canary-*"))  # canaries removed
    blind = tmp_path / "blind_harness.py"
    blind.write_text(
        "import json\n"
        "checks = {n: {'status': 'pass', 'detail': ''} for n in ("
        "'host_canary','host_home','root_readonly','no_new_privs','pid_namespace','user_namespace')}\n"
        "print(json.dumps({'schemaVersion': 1, 'verdict': 'pass', 'network': 'limited',"
        " 'checks': checks}))\n"
    )
    report = run_control(paths, open_host(), harness_file=blind)
    assert report.codes() == ["isolation_control_failed"]
    record = json.loads(paths.control_file.read_text())
    assert record["passed"] is False


def test_acceptance_requires_control(configured: Path) -> None:
    code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--apply")
    assert "isolation_control_required" in codes(report)
    state = load_state(Paths.from_env().writer_dir("demo-w1"))
    assert state is not None and state.phase == "not_ready"


def test_accepted_container_protects_git_config_and_hooks(accepted: Path) -> None:
    paths = Paths.from_env()
    state = load_state(paths.writer_dir("demo-w1"))
    assert state is not None and state.phase == "ready"
    from writerpool.pool.writer.container import writer_spec
    from writerpool.runtime.image import resolve_image

    config = load_config(paths).config
    host = open_host()
    spec = writer_spec(
        paths, host, state, resolve_image(paths, state.image), config.pool, host.facts()
    )
    script = (
        "git config core.fsmonitor 'touch /work/pwned' && echo CONFIG-WRITABLE; "
        "touch /work/.git/hooks/pre-commit && echo HOOKS-WRITABLE; "
        "echo hi > /work/new.txt && echo WORK-WRITABLE; "
        "grep -E 'CapEff|NoNewPrivs' /proc/self/status; "
        "echo PIDNS=$(readlink /proc/self/ns/pid) PIDS=$(ls /proc | grep -c '^[0-9]'); "
        "echo USERNS=$(readlink /proc/self/ns/user); "
        "touch /etc/x 2>/dev/null && echo ROOT-WRITABLE; ls -A "
        + str(Path.home())
        + " 2>&1 | head -1"
    )
    done = open_host().run(spec, ["sh", "-c", script], timeout=60)
    out = done.stdout.decode()
    assert "WORK-WRITABLE" in out
    assert "CONFIG-WRITABLE" not in out and "HOOKS-WRITABLE" not in out
    assert "ROOT-WRITABLE" not in out
    assert "CapEff:\t0000000000000000" in out and "NoNewPrivs:\t1" in out
    assert "No such file" in out  # the host home does not exist inside
    fields = dict(
        w.split("=", 1) for w in out.split() if w.startswith(("PIDNS=", "PIDS=", "USERNS="))
    )
    assert fields["PIDNS"] != os.readlink("/proc/self/ns/pid")  # its own PID namespace
    assert int(fields["PIDS"]) <= 5  # and it sees only its own few processes
    assert fields["USERNS"] != os.readlink("/proc/self/ns/user")
    clone = paths.writer_dir("demo-w1") / "clone"
    assert (clone / "new.txt").read_text() == "hi\n"
    assert "fsmonitor" not in (clone / ".git" / "config").read_text()


def test_changed_image_makes_writer_not_ready(accepted: Path) -> None:
    paths = Paths.from_env()
    pin = json.loads(paths.image_pin_file.read_text())
    # Re-tag the same image under a new id by committing a trivial layer on top.
    podman("run", "--name", "wp-test-img", "--pull=never", pin["imageId"], "true")
    try:
        new_id = podman("commit", "-q", "wp-test-img").strip()
    finally:
        podman("rm", "-f", "wp-test-img")
    try:
        pin["imageId"] = new_id.removeprefix("sha256:")
        paths.image_pin_file.write_text(json.dumps(pin))
        _, listing = wp("writer", "list")
        row = listing["data"]["writers"][0]
        assert (row["phase"], row["reason"]) == ("not_ready", "writer_acceptance_stale")
        code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--apply")
        assert "writer_accepted" in codes(report)
        # A provisioning change replaces the writer that holds nothing, in the same run.
        code, report = wp(
            "mode", "set", "demo", "container", "--profiles", "code", "--network", "none", "--apply"
        )
        assert code == 0 and "writer_replaced" in codes(report), report
        assert codes(report).index("writer_replaced") < codes(report).index("writer_accepted")
        _, listing = wp("writer", "list")
        row = listing["data"]["writers"][0]
        assert row["leasable"] and row["network"] == "none", row
    finally:
        remove_images(new_id)


def test_fingerprint_change_during_acceptance_is_caught(accepted: Path) -> None:
    paths = Paths.from_env()
    podman_ = open_host()
    config = load_config(paths).config
    state = load_state(paths.writer_dir("demo-w1"))
    assert state is not None

    def change_cache_setting() -> None:  # as if the writer's settings moved mid-run
        from writerpool.state.writer import save_state

        current = load_state(paths.writer_dir("demo-w1"))
        assert current is not None
        save_state(paths.writer_dir("demo-w1"), current.model_copy(update={"network": "none"}))

    with operate(paths, podman_, 1.0, "demo-w1"):
        state, finding = accept(paths, podman_, state, config, after_run=change_cache_setting)
    assert finding.code == "acceptance_fingerprint_changed"
    assert state.phase == "not_ready"
    failure = paths.writer_dir("demo-w1") / "acceptance-failure.json"
    assert oct(failure.stat().st_mode & 0o777) == "0o600"
    record = json.loads(failure.read_text())
    assert record["code"] == "acceptance_fingerprint_changed"
    assert str(Path.home()) not in failure.read_text()


HOLDER = """
import sys, time
from pathlib import Path
from writerpool.pool.writer.lease import Lease
lease = Lease(Path(sys.argv[1]))
lease.acquire(wait=5)
print("held", flush=True)
time.sleep(600)
"""


def test_two_operator_commands_one_gets_writer_busy(accepted: Path) -> None:
    wdir = Paths.from_env().writer_dir("demo-w1")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(wdir)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        # a new image pin makes w1 stale, so the next apply must take its lease to re-accept
        state = load_state(wdir)
        assert state is not None
        from writerpool.state.writer import save_state

        save_state(wdir, state.model_copy(update={"fingerprint": "sha256:stale"}))
        code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--apply")
        assert code == 1 and "writer_busy" in codes(report)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--apply")
    assert code == 0 and "writer_accepted" in codes(report)


def test_unreachable_podman_fences_and_changes_nothing(
    accepted: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = Paths.from_env()
    state_file = paths.writer_dir("demo-w1") / "state.json"
    before = state_file.read_bytes()
    clone_before = snapshot_tree(paths.writer_dir("demo-w1") / "clone")
    # Podman's API cannot be reached (the CLI still answers).
    blocked = tmp_path / "blocked"
    blocked.mkdir(mode=0o500)
    monkeypatch.setenv("WRITERPOOL_PODMAN_SOCKET", str(blocked / "run" / "podman.sock"))
    code, report = wp(
        "mode", "set", "demo", "container", "--profiles", "code", "--writers", "2", "--apply"
    )
    # Doctor probes the API service now, so the gate refuses with its own check id and
    # remedy, before any fence could only say "could not confirm" (writer_fenced).
    assert codes(report) == ["doctor_failed"]
    assert report["findings"][0]["data"]["check"] == "podman_api"
    assert state_file.read_bytes() == before
    assert snapshot_tree(paths.writer_dir("demo-w1") / "clone") == clone_before
    assert not (paths.writer_dir("demo-w2") / "clone").exists()
