"""Provisioning by stream: the base bundle goes into a throwaway container on the
writer's host (clonetool `provision` from the image), which clones it into the writer's
storage there. The same code on the local host and on the test host over SSH; on the
test host every mount is one of that host's volumes, no path of this machine."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_collect_helpers import ready_writer, unique_alias, write_workspaces
from tests.integration.writers_support import wp
from tests.support import procs
from tests.support.repos import make_repo, run_git
from tests.support.testhost import add_host, provision_there, send_image
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.modes import ContainerSettings
from writerpool.config.paths import Paths
from writerpool.crash import ENV
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef, resolve_base
from writerpool.gitops.bundle import base_bundle_format
from writerpool.pool.provision.make import base_record, provision
from writerpool.pool.provision.stream import clone_on_host
from writerpool.pool.writer.inspect import tool_spec
from writerpool.report import Report
from writerpool.runtime import image_tools
from writerpool.runtime.host import WriterHost, writer_at
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.runtime.spec import ContainerSpec
from writerpool.runtime.volumes import writer_volumes
from writerpool.state.writer import Baseline, WriterState, load_state, save_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


def _state(host: str, base: BaseRef, tags: str = "none") -> WriterState:
    name = f"tprov{secrets.token_hex(3)}-w1"
    fields = {
        "name": name, "alias": name[:-3], "settings_digest": "sha256:" + "0" * 64,
        "image": "default", "network": "none", "cache": "none", "lifecycle": "persistent",
        "tags": tags, "profiles": ["code"], "host": host, "base": base_record(base),
    }  # fmt: skip
    return WriterState.model_validate(fields)


def _provision(
    host: WriterHost, repo: Path, tags: str = "none"
) -> tuple[WriterState, Baseline, BaseRef]:
    base = resolve_base(repo, "main")
    state = _state(host.name, base, tags)
    paths = Paths.from_env()
    save_state(paths.writer_dir(state.name), state)  # recorded first, as provision does
    host.create_storage(writer_at(paths, state.name, host.name), cache=False, adopt=False)
    baseline = clone_on_host(paths, host, state, Pool(), repo, base, Report("test"))
    return state, baseline, base


def _in_clone(host: WriterHost, state: WriterState, script: str) -> str:
    spec = tool_spec(Paths.from_env(), host, state, Pool(), "view")
    done = host.run(spec, ["sh", "-ec", script])
    assert done.returncode == 0, done.stderr[-1000:]
    return done.out


CHECK = (
    "cd /work; git -c safe.directory=* rev-parse HEAD; git -c safe.directory=* branch "
    "--format='%(refname)'; ls -A .git/hooks | wc -l; test ! -e .git/logs && echo nologs; "
    "test ! -e .git/provision.bundle && echo nobundle; ls .git/objects/info"
)


def test_a_local_writer_is_cloned_in_a_container_from_the_streamed_bundle(
    tmp_path: Path, image_pin: Path
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=3)
    run_git(repo, "tag", "v1", "HEAD~1")
    host = LocalPodman()
    state, baseline, _ = _provision(host, repo, tags="reachable")
    head = run_git(repo, "rev-parse", "main").out.strip()
    assert (baseline.head, baseline.commit, baseline.branches) == ("refs/heads/main", head,
                                                                   {"main": head})  # fmt: skip
    assert list(baseline.tags) == ["refs/tags/v1"]
    lines = _in_clone(host, state, CHECK).split()
    assert lines[:4] == [head, "refs/heads/main", "0", "nologs"] and "nobundle" in lines
    assert "commit-graph" in lines  # later walks stop at the base
    clone = Paths.from_env().writer_dir(state.name) / "clone"
    tracked = {p.split("/")[0] for p in run_git(repo, "ls-files").out.split()}
    assert {p.name for p in clone.iterdir()} == {".git", *tracked}


@pytest.mark.parametrize(
    ("origin", "copied"),
    [
        ("https://git.example.test/team/repo.git", True),
        ("https://user:token@git.example.test/team/repo.git", False),
    ],
)
def test_the_origin_reaches_the_clone_only_without_credentials(
    tmp_path: Path, image_pin: Path, origin: str, copied: bool
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=2, files=2)
    run_git(repo, "remote", "add", "origin", origin)
    host = LocalPodman()
    base = resolve_base(repo, "main")
    state = _state(host.name, base)
    paths = Paths.from_env()
    save_state(paths.writer_dir(state.name), state)
    host.create_storage(writer_at(paths, state.name, host.name), cache=False, adopt=False)
    report = Report("test")
    clone_on_host(paths, host, state, Pool(), repo, base, report)
    remotes = _in_clone(host, state, "cd /work; git config --file .git/config --get-regexp "
                        "'^remote\\.' || true")  # fmt: skip
    if copied:
        settings = dict(line.split(" ", 1) for line in remotes.splitlines())
        assert settings["remote.origin.url"] == origin and report.codes() == []
    else:
        assert remotes == "" and report.codes() == ["remote_url_refused"]
        assert "token" not in str(report.findings)


def _mounts_of(remote: RemotePodman, spec: ContainerSpec) -> list[dict[str, Any]]:
    """The mounts the test host gives a container of `spec` (created, inspected, removed)."""
    argv = spec.run_argv(["true"])
    assert argv[:2] == ["run", "--rm"]
    created = remote.cli(["create", *argv[2:]]).out.strip()
    try:
        raw = remote.cli(["container", "inspect", "--format", "{{json .Mounts}}", created]).out
        return list(json.loads(raw))
    finally:
        remote.cli(["rm", "--force", created], check=False)


@pytest.mark.every_testhost
@pytest.mark.remote
def test_a_remote_writer_is_cloned_on_its_host_and_no_mount_names_this_machine(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=4, files=2)
    with connect("th", testhost) as remote:
        send_image(remote, image_pin)
        state, baseline, base = _provision(remote, repo)
        writer = writer_at(Paths.from_env(), state.name, remote.name)
        try:
            head = run_git(repo, "rev-parse", "main").out.strip()
            assert (baseline.commit, baseline.branches) == (head, {"main": head})
            lines = _in_clone(remote, state, CHECK).split()
            assert lines[:4] == [head, "refs/heads/main", "0", "nologs"] and "nobundle" in lines
            # Nothing of the clone is on this machine: only the record (state) is.
            here = {p.name for p in writer.record.path.iterdir()}
            assert "state.json" in here and not {"clone", "agent", "cache"} & here, here
            # A provisioning killed midway left a part (files, an unwritable directory, a
            # broken git directory): the next run starts again and completes.
            _in_clone_rw(
                remote,
                state,
                "rm -rf /work/.git/refs; echo junk > /work/.git/HEAD; "
                "mkdir -p /work/half/d && touch /work/half/d/f && chmod 0500 /work/half/d",
            )
            again = clone_on_host(Paths.from_env(), remote, state, Pool(), repo, base,
                                  Report("test"))  # fmt: skip
            assert again == baseline
            assert "half" not in _in_clone(remote, state, "ls -A /work").split()
            for spec in (
                tool_spec(Paths.from_env(), remote, state, Pool(), "provision", clone_rw=True),
                tool_spec(Paths.from_env(), remote, state, Pool(), "view"),
            ):
                mounts = _mounts_of(remote, spec)
                assert mounts and {m["Type"] for m in mounts} == {"volume"}, mounts
                for mount in mounts:
                    _assert_not_the_controllers(mount["Source"], tmp_path)
        finally:
            remote.remove_storage(writer)


def _in_clone_rw(remote: RemotePodman, state: WriterState, script: str) -> None:
    spec = tool_spec(Paths.from_env(), remote, state, Pool(), "provision", clone_rw=True)
    done = remote.run(spec, ["sh", "-ec", script])
    assert done.returncode == 0, done.stderr[-1000:]


def _assert_not_the_controllers(source: str, tmp_path: Path) -> None:
    paths = Paths.from_env()
    controller = (Path.home(), paths.state_dir, tmp_path, image_tools.PACKAGE_DIR)
    assert not any(source.startswith(str(p)) for p in controller), source
    assert "/volumes/writerpool-" in source, source


# Provision one writer on the test host in a process of its own, which a crash point
# (writerpool/crash.py) may kill: argv is the repo, the writer's name and the host's
# url, identity and known_hosts.
PROVISION = """
import sys
from pathlib import Path
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.modes import ContainerSettings
from writerpool.config.paths import Paths
from writerpool.crash import ENV
from writerpool.gitops.base import resolve_base
from writerpool.pool.provision.make import provision
from writerpool.report import Report
from writerpool.runtime.remote import connect
repo, name, url, identity, known = sys.argv[1:]
host = HostConfig(url=url, identity=Path(identity), known_hosts=Path(known))
settings = ContainerSettings(profiles=("code",), base="main", network="none")
with connect("th", host) as remote:
    provision(Paths.from_env(), remote, name[:-3], name, Path(repo), settings,
              resolve_base(Path(repo), "main"), Report("test"), Pool())
"""


def _ssh_pids() -> set[int]:
    # Another account's writerpool is not this test's.
    return {p.pid for p in procs.mine()
            if p.argv and p.argv[0].endswith(b"ssh")
            and any(b"writerpool-host-" in a for a in p.argv)}  # fmt: skip


@pytest.mark.remote
@pytest.mark.parametrize("point", ["provision.state_recorded", "provision.cloned"])
def test_a_remote_provisioning_killed_midway_leaves_state_readable_and_the_next_run_completes(
    tmp_path: Path, image_pin: Path, testhost: HostConfig, point: str
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=3)
    name = f"tkill{secrets.token_hex(3)}-w1"
    argv = [sys.executable, "-c", PROVISION, str(repo), name, testhost.url,
            str(testhost.identity), str(testhost.known_hosts)]  # fmt: skip
    paths = Paths.from_env()
    with connect("th", testhost) as remote:
        send_image(remote, image_pin)
        writer = writer_at(paths, name, remote.name)
        try:
            before = _ssh_pids()
            killed = subprocess.run(argv, env={**os.environ, ENV: point}, capture_output=True,
                                    timeout=600, check=False)  # fmt: skip
            assert killed.returncode == -9, killed.stderr[-2000:]
            for pid in _ssh_pids() - before:  # the killed process's forward, orphaned
                os.kill(pid, signal.SIGKILL)
            state = load_state(paths.writer_dir(name))  # readable: raises when corrupt
            assert state is not None and state.phase == "provisioning" and state.host == "th"
            done = subprocess.run(argv, capture_output=True, timeout=600, check=False)
            assert done.returncode == 0, done.stderr[-2000:]
            state = load_state(paths.writer_dir(name))
            head = run_git(repo, "rev-parse", "main").out.strip()
            assert state is not None and state.baseline is not None
            assert (state.phase, state.baseline.commit) == ("not_ready", head)
            lines = _in_clone(remote, state, CHECK).split()
            assert lines[:4] == [head, "refs/heads/main", "0", "nologs"]
        finally:
            remote.remove_storage(writer)


@pytest.mark.remote
def test_writer_list_shows_writers_on_two_hosts_each_read_on_its_own(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=3)
    alias = unique_alias("two")
    paths = write_workspaces({alias: repo})
    add_host(testhost)
    local_writer, remote_writer = ready_writer(alias), f"{alias}-w2"
    with connect("th", testhost) as remote:
        provision_there(remote, paths, alias, remote_writer, repo, image_pin)
        try:
            code, listed = wp("writer", "list")
            assert code in (0, 1), listed
            rows = {r["name"]: r for r in listed["data"]["writers"] if r["workspace"] == alias}
            assert rows[local_writer]["host"] == "local" and rows[local_writer]["leasable"]
            there = rows[remote_writer]
            assert (there["host"], there["phase"], there["leasable"]) == ("th", "not_ready", False)
            # Its clone was inspected in a container on th: at its baseline, not unknown.
            assert there["atBaseline"] is True and there["atBaselineUnknown"] is None, there
            messages = {f["target"]: f["message"] for f in listed["findings"]}
            assert "host th" in messages[f"writer/{alias}/{remote_writer}"]
            assert "host local" in messages[f"writer/{alias}/{local_writer}"]
            code, status = wp("writer", "status", remote_writer)
            assert status["data"]["writers"][0]["host"] == "th", status
            assert testhost.target.address not in json.dumps([listed, status])
        finally:
            remote.remove_storage(writer_at(paths, remote_writer, remote.name))


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_the_clone_holds_every_object_and_checks_out_clean(
    tmp_path: Path, image_pin: Path, object_format: str
) -> None:
    repo = tmp_path / "operator"
    repo.mkdir()
    run_git(repo, "init", "-q", f"--object-format={object_format}", "--initial-branch=main")
    make_repo(repo, 300)
    run_git(repo, "tag", "-a", "-m", "release", "v1", "main~5")
    host = LocalPodman()
    state, baseline, base = _provision(host, repo, tags="reachable")
    assert list(baseline.tags) == ["refs/tags/v1"]
    # Read in the writer's image, as any later reader of the clone does.
    out = _in_clone(host, state, "cd /work; g() { git -c safe.directory='*' \"$@\"; }; "
                    "g rev-parse --show-object-format; g fsck --full --strict --no-dangling; "
                    "g symbolic-ref HEAD; g rev-parse HEAD; g rev-list --count HEAD; "
                    "g rev-parse 'v1^{commit}'; g status --porcelain --untracked-files=all; "
                    "g remote")  # fmt: skip
    fifth = run_git(repo, "rev-parse", "main~5").out.strip()
    assert out.split() == [object_format, "refs/heads/main", base.commit, "300", fifth]


def test_a_bundle_with_prerequisites_is_not_a_base(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "operator", 5)
    thin = tmp_path / "thin.bundle"
    run_git(repo, "bundle", "create", "-q", str(thin), "main", "^main~2")
    with pytest.raises(WriterpoolError) as info:
        base_bundle_format(thin)
    assert info.value.code == "writer_clone_failed"


@pytest.mark.remote
def test_provisioning_on_a_host_without_the_image_refuses_before_anything_is_made(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=2, files=2)
    name = f"tnoimg{secrets.token_hex(3)}-w1"
    absent = "0" * 64  # an image ID no host holds
    settings = ContainerSettings(profiles=("code",), base="main", network="none", image=absent)
    paths = Paths.from_env()
    with connect("th", testhost) as remote:
        with pytest.raises(WriterpoolError) as exc:
            provision(paths, remote, name[:-3], name, repo, settings, resolve_base(repo, "main"),
                      Report("test"), Pool())  # fmt: skip
        assert exc.value.code == "image_unavailable"
        assert "image transfer --host th" in exc.value.message
        assert writer_volumes(remote, writer_at(paths, name, remote.name)) == []
    assert not paths.writer_dir(name).exists()
