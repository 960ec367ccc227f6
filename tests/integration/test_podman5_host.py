"""The Debian 13 test host (scripts/testhost … --debian 13): Debian's own Podman 5, with
pasta as its rootless network, reached over SSH like any host.

A writer on another host may not have an open network (its provider's key would have to
go to that host), so pasta is shown there the way acceptance would judge it: the harness
the image carries, in the writer's own container with `--network pasta` on that host,
against that host's canary and loopback, classifies it as not limited; and a placement
asking for it is refused for the key, not for the host's Podman."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import unique_alias, write_workspaces
from tests.integration.writers_support import codes, wp
from tests.support.repos import make_repo
from tests.support.testhost import add_host, provision_there
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.network import classification
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.report import HarnessReport, parse_harness_report
from writerpool.pool.writer.container import writer_spec
from writerpool.runtime.host import writer_at
from writerpool.runtime.image_tools import HARNESS
from writerpool.runtime.podman_api import request
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.state.writer import WriterState

pytestmark = [pytest.mark.podman, pytest.mark.remote]


def test_the_debian13_host_runs_podman5_rootless_with_pasta_as_its_network(
    testhost5: HostConfig,
) -> None:
    with connect("th", testhost5) as remote:
        facts = remote.facts()
        # The service's own answer: this machine's podman client prints only the fields
        # its own release knows (docs/hosts.md, "Podman releases").
        status, body = request(remote.socket_path, "GET", "/info", 60)
    assert facts.podman_version.split(".")[0] == "5" and facts.rootless, facts
    info = json.loads(body)
    assert status == 200 and info["host"]["rootlessNetworkCmd"] == "pasta", info["host"]
    assert info["host"]["pasta"]["executable"].endswith("/pasta")


def test_doctor_names_the_podman5_host_and_its_cgroups_with_their_remedy(
    testhost5: HostConfig,
) -> None:
    wp("config", "init", check=True)
    add_host(testhost5)
    _, doctor = wp("doctor")
    checks = {f["code"]: f for f in doctor["findings"] if f["target"] == "host/th"}
    assert checks["remote_podman"]["status"] == "ok", checks
    assert checks["remote_podman"]["message"].startswith("rootless Podman 5.")
    assert checks["remote_tools"]["status"] == "ok", checks
    cgroups = checks["remote_cgroups"]
    # The host runs on this machine's kernel: its cgroups are this machine's.
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():  # unified v2
        assert cgroups["data"]["layout"] == "v2", cgroups
    else:
        assert cgroups["status"] == "warning" and cgroups["data"]["layout"] == "v1", cgroups
        assert "Podman 6 removes it" in cgroups["message"] and "cgroup v2" in cgroups["remedy"]
    assert testhost5.target.address not in json.dumps(doctor)


def _harness_in_writer(remote: RemotePodman, state: WriterState, image_id: str) -> HarnessReport:
    """The harness in the writer's session container on its host, with the probes and the
    environment acceptance gives it: the host's canary and loopback; on an open network
    the key is copied in for a session, so no canary credential is sent
    (pool/acceptance/accept.py). Run by the host's own podman, as a session's pi is: a Podman
    4.3 client on this machine knows no pasta network."""
    spec = writer_spec(Paths.from_env(), remote, state, image_id, Pool(), remote.facts())
    assert spec.network == state.network
    with remote.planted_canary() as canary, remote.loopback_listener() as port:
        env = {
            **spec.env,
            "WRITERPOOL_HARNESS_CANARIES": canary.file,
            "WRITERPOOL_HARNESS_HOST_HOME": canary.home,
            "WRITERPOOL_HARNESS_WORK": "/work",
            "WRITERPOOL_HARNESS_CANARY": "skip",
            "WRITERPOOL_HARNESS_HOST_PORT": str(port),
        }
        out = bytearray()
        done = remote.stream(
            spec.model_copy(update={"env": env}), ["python3", HARNESS],
            timeout=120, input=b"", consume=lambda f: out.extend(f.read()),
        )  # fmt: skip
    report = parse_harness_report(bytes(out))
    assert done.returncode == 0 and report is not None, done.stderr[-2000:]
    return report


@pytest.mark.image
@pytest.mark.git
def test_a_pasta_writer_on_podman5_is_contained_and_classified_not_limited(
    tmp_path: Path, image_pin: Path, testhost5: HostConfig
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=2, files=2)
    alias = unique_alias("pasta")
    paths = Paths.from_env()
    with connect("th", testhost5) as remote:
        made = provision_there(remote, paths, alias, f"{alias}-w1", repo, image_pin)
        try:
            pasta = made.model_copy(update={"network": "pasta"})
            pinned = str(json.loads(image_pin.read_text())["imageId"])
            report = _harness_in_writer(remote, pasta, pinned)
        finally:
            remote.remove_storage(writer_at(paths, made.name, remote.name))
    print(json.dumps(report.model_dump(by_alias=True), indent=1))
    # Contained as any writer: the host's canary, its home, its engine are out of reach.
    assert report.verdict == "pass", report.with_status("fail")
    # …and not limited, as the documented table and acceptance's expectation say.
    assert report.network == classification("pasta") == "not_limited"
    assert report.status_of("net_interfaces") == "fail"
    assert report.status_of("net_routes") == "fail"
    # A route exists: the active probes were not run, so no packet left for them.
    assert report.network_checks["net_direct"].detail == "a route exists (not probed)"


@pytest.mark.image
@pytest.mark.git
def test_a_placement_with_pasta_on_the_podman5_host_is_refused_for_the_key(
    tmp_path: Path, image_pin: Path, testhost5: HostConfig
) -> None:
    alias = unique_alias("pastaplace")
    paths = write_workspaces({alias: make_repo(tmp_path / "checkout", commits=2, files=2)})
    add_host(testhost5)
    options = ["container", "--profiles", "code", "--network", "pasta", "--writers", "1"]
    code, refused = wp("mode", "set", alias, *options, "--hosts", "th", "--apply")
    assert code != 0 and "writer_host_unsupported" in codes(refused), refused
    [finding] = [f for f in refused["findings"] if f["code"] == "writer_host_unsupported"]
    assert "the provider's key stays on this machine" in finding["message"]
    assert "Podman" not in finding["message"]  # this host has pasta: the key is the reason
    assert not paths.modes_file.exists() or alias not in paths.modes_file.read_text()
    assert not paths.writer_dir(f"{alias}-w1").exists()
