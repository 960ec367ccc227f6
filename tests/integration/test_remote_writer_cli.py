"""The commands on one writer (log, collect, remove) run on that writer's own host: for a
writer on the test host, the CLI (a real process) connects to it and works there; with
the host unreachable, they refuse with writer_host_unreachable and change nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    collected,
    ready_writer,
    unique_alias,
    write_workspaces,
)
from tests.integration.test_provision_stream import _in_clone_rw
from tests.integration.writers_support import codes, wp
from tests.support.cli import run_cli
from tests.support.repos import make_repo
from tests.support.testhost import add_host, provision_there
from writerpool.config.hosts import HostConfig
from writerpool.config.paths import Paths
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import connect
from writerpool.runtime.volumes import writer_volumes

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.remote]

WORK = (
    "cd /work; g='git -c safe.directory=* -c user.name=a -c user.email=a@a.test'; "
    "$g checkout -q -b feature; echo done > done.txt; $g add done.txt; "
    "$g commit -q -m 'the agent finished'; echo wip > wip.txt"
)


def test_a_remote_writers_log_collect_and_remove_run_on_its_host(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=2)
    alias = unique_alias("cli")
    paths = write_workspaces({alias: repo})
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    add_host(testhost)
    name = f"{alias}-w1"
    with connect("th", testhost) as remote:
        state = provision_there(remote, paths, alias, name, repo, image_pin)
        _in_clone_rw(remote, state, WORK)
    try:
        # Unreachable (its port closed): refused, nothing imported, the state unchanged.
        before = (paths.writer_dir(name) / "state.json").read_bytes()
        target = testhost.target
        closed = testhost.model_copy(
            update={"url": f"ssh://{target.user}@{target.address}:2{target.socket}"}
        )
        config.write_text(config.read_text().replace(testhost.url, closed.url))
        code, refused = wp("writer", "collect", name, "--apply")
        assert code == 1 and codes(refused) == ["writer_host_unreachable"], refused
        assert target.address not in json.dumps(refused)
        assert collected(repo, name) == {}
        assert (paths.writer_dir(name) / "state.json").read_bytes() == before
        config.write_text(config.read_text().replace(closed.url, testhost.url))

        log = run_cli("writer", "log", name, "feature")
        assert log.code == 0 and "the agent finished" in log.out, log.err[-2000:]
        code, report = wp("writer", "collect", name, "--apply")
        assert code == 0 and "writer_collected" in codes(report), report
        assert set(collected(repo, name)) == {"feature", "feature-wip"}
        code, removed = wp("writer", "remove", name, "--apply")
        assert code == 0 and "writer_removed" in codes(removed), removed
        with connect("th", testhost) as remote:
            assert writer_volumes(remote, writer_at(paths, name, remote.name)) == []
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), name, remote.name))


def test_mode_set_judges_and_removes_a_surplus_writer_on_its_own_host(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=2)
    alias = unique_alias("surplus")
    paths = write_workspaces({alias: repo})
    add_host(testhost)
    ready_writer(alias)  # w1 on local: the mode stored asks for one writer
    surplus = f"{alias}-w2"
    with connect("th", testhost) as remote:
        state = provision_there(remote, paths, alias, surplus, repo, image_pin)
        _in_clone_rw(remote, state, WORK)
    mode = ("mode", "set", alias, "container", "--profiles", "code", "--network", "none")
    try:
        # Its work is seen on th: the surplus writer is kept until collected.
        code, refused = wp(*mode, "--apply")
        assert code == 1 and "writer_uncollected" in codes(refused), refused
        with connect("th", testhost) as remote:
            assert writer_volumes(remote, writer_at(paths, surplus, remote.name))
        assert wp("writer", "collect", surplus, "--apply")[0] == 0
        code, applied = wp(*mode, "--apply")
        assert code == 0, applied
        removed = [f["target"] for f in applied["findings"] if f["code"] == "writer_removed"]
        assert removed == [f"writer/{alias}/{surplus}"]
        with connect("th", testhost) as remote:
            assert writer_volumes(remote, writer_at(paths, surplus, remote.name)) == []
        assert not (paths.writer_dir(surplus) / "state.json").exists()
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), surplus, remote.name))


def test_uninstall_judges_and_removes_a_writer_on_its_own_host(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=2)
    alias = unique_alias("gone")
    paths = write_workspaces({alias: repo})
    add_host(testhost)
    name = f"{alias}-w1"
    with connect("th", testhost) as remote:
        state = provision_there(remote, paths, alias, name, repo, image_pin)
        _in_clone_rw(remote, state, WORK)
    try:
        code, refused = wp("uninstall", "--keep-images", "--apply")
        assert code == 1 and {"writer_uncollected", "uninstall_refused"} <= set(codes(refused))
        assert (paths.writer_dir(name) / "state.json").exists()
        with connect("th", testhost) as remote:
            assert writer_volumes(remote, writer_at(paths, name, remote.name))
        code, done = wp("uninstall", "--keep-images", "--discard", "--apply")
        assert code == 0 and "writer_removed" in codes(done), done
        with connect("th", testhost) as remote:
            assert writer_volumes(remote, writer_at(paths, name, remote.name)) == []
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), name, remote.name))
