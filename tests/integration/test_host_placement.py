"""`mode set … --hosts` on the test host: the host recorded in each writer's state and
shown by `writer list`; writers on the test host are accepted there and listed beside
this machine's, and the fingerprint their acceptance records is that of the very spec a
session runs there. (The placement rule and its refusals are the pool's own logic, tested
on a host kept in memory: tests/unit/test_mode_placement.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    ready_writer,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp
from tests.support.cli import run_cli
from tests.support.repos import make_repo
from tests.support.testhost import add_host
from writerpool.config.hosts import HostConfig
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.accept import fingerprint_groups, fingerprint_of
from writerpool.pool.claims.lease_ready import lease_ready_writer
from writerpool.runtime.host import writer_at
from writerpool.runtime.hosts import WriterHosts
from writerpool.runtime.remote import connect

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.mark.every_testhost
@pytest.mark.remote
def test_writers_on_two_hosts_are_accepted_and_listed_in_one_command(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    alias = unique_alias("two")
    write_workspaces({alias: make_repo(tmp_path / "checkout", commits=2, files=2)})
    add_host(testhost)
    ready_writer(alias)
    wp("image", "transfer", "--host", "th", check=True)
    options = ["container", "--profiles", "code", "--network", "none", "--writers", "2"]
    try:
        # This machine's control says nothing of th: w2 is made there, not accepted.
        _, report = wp("mode", "set", alias, *options, "--hosts", "local,th", "--apply")
        [refused] = [f for f in report["findings"] if f["code"] == "isolation_control_required"]
        assert "writerpool control --host th --apply" in refused["message"], report
        assert state_of(f"{alias}-w2").phase == "not_ready"

        wp("control", "--host", "th", "--apply", check=True)
        code, report = wp("mode", "set", alias, *options, "--hosts", "local,th", "--apply")
        assert code == 0, report
        accepted = [f["target"] for f in report["findings"] if f["code"] == "writer_accepted"]
        assert accepted == [f"writer/{alias}/{alias}-w2"], report
        assert state_of(f"{alias}-w2").host == "th"

        _, listed = wp("writer", "list")
        hosts = {w["name"]: (w["host"], w["leasable"]) for w in listed["data"]["writers"]
                 if w["workspace"] == alias}  # fmt: skip
        assert hosts == {f"{alias}-w1": ("local", True), f"{alias}-w2": ("th", True)}, listed
        shown = run_cli("writer", "list")
        print("writer list:", shown.out, sep="\n")
        assert "host local" in shown.out and "host th" in shown.out
        assert testhost.target.address not in shown.out
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), f"{alias}-w2", remote.name))


@pytest.mark.remote
def test_the_fingerprint_recorded_at_acceptance_on_a_host_is_that_of_the_spec_a_session_runs(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> None:
    alias = unique_alias("spec")
    write_workspaces({alias: make_repo(tmp_path / "checkout", commits=2, files=2)})
    add_host(testhost)
    wp("image", "transfer", "--host", "th", check=True)
    wp("control", "--host", "th", "--apply", check=True)
    options = ["container", "--profiles", "code", "--network", "provider", "--hosts", "th"]
    name = f"{alias}-w1"
    try:
        code, report = wp("mode", "set", alias, *options, "--apply")
        assert code == 0 and "writer_accepted" in codes(report), report
        paths, loaded = Paths.from_env(), load_config(Paths.from_env())
        state = state_of(name)
        with WriterHosts(loaded.config.hosts) as hosts:
            slot = lease_ready_writer(paths, loaded, alias, None, hosts=hosts)
            try:
                assert (slot.name, slot.host.name) == (name, "th")
                groups = fingerprint_groups(paths, slot.host, state, loaded.config)
                session = {**groups, "container_spec": slot.spec.digest()}
                assert fingerprint_of(session) == state.fingerprint
                # That spec runs there: the guards, the agent directory provisioning
                # wrote on the host, and the proxy's socket forwarded for the writer.
                with slot.host.egress_endpoint(slot.writer):
                    done = slot.host.run(slot.spec, ["sh", "-ec", SEEN], timeout=120)
                assert done.returncode == 0, done.stderr[-2000:]
                assert done.out.split() == ["socket", "settings.json", "git"], done.out
            finally:
                slot.release()
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), name, remote.name))


SEEN = (
    "test -S /pi/egress/proxy.sock && echo socket; ls /pi/agent | grep -x settings.json; "
    "test -f /work/.git/config && echo git"
)
