"""The acceptance fingerprint digests the spec that runs on the writer's host: every mount
of a writer's container comes from its host, so a mount only that host has (its socket
path for the writer's proxy, the directory of its volumes) is in the fingerprint, and
acceptance runs the very spec each session of the writer gets, the same every time."""

from __future__ import annotations

import json

from tests.support.memhost import MemoryHost
from writerpool.config.models import Config, Pool
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.accept import (
    accept,
    fingerprint_groups,
    fingerprint_of,
    groups_given,
    readiness,
)
from writerpool.pool.acceptance.control import ControlRecord, harness_digest, save_control
from writerpool.pool.writer.container import session_spec, writer_of
from writerpool.runtime.host import WriterHost
from writerpool.runtime.image_tools import HARNESS
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import BaseRecord, WriterState, load_state, now, save_state

IMAGE = "b" * 64


def _writer(paths: Paths, host: WriterHost, network: str = "provider") -> WriterState:
    """A provisioned writer on `host` (its storage made there), not yet accepted."""
    fields = {
        "name": "demo-w1", "alias": "demo", "settings_digest": "sha256:" + "0" * 64,
        "image": IMAGE, "network": network, "cache": "none", "lifecycle": "keep",
        "tags": "none", "profiles": ["default"], "host": host.name,
        "base": BaseRecord(name="main", ref="refs/heads/main", commit="a" * 40, branch="main"),
    }  # fmt: skip
    state = save_state(paths.writer_dir("demo-w1"), WriterState.model_validate(fields))
    host.create_storage(writer_of(paths, state), cache=False, adopt=False)
    record = ControlRecord(passed=True, at=now(), harness_digest=harness_digest())
    save_control(paths, record, host.name)
    return state


def _controller_paths(spec: ContainerSpec, paths: Paths) -> list[str]:
    return [str(m.source) for m in spec.mounts if str(m.source).startswith(str(paths.state_dir))]


def test_a_mount_only_the_writers_host_has_changes_the_fingerprint() -> None:
    paths, config = Paths.from_env(), Config(pool=Pool())
    pool = config.pool
    host = MemoryHost("th", images=(IMAGE,))
    state = _writer(paths, host)
    spec = session_spec(paths, host, state, pool)
    assert _controller_paths(spec, paths) == []  # every mount is the host's
    assert "/run/user/1000/writerpool/egress/demo-w1" in [str(m.source) for m in spec.mounts]
    groups = fingerprint_groups(paths, host, state, config)
    assert groups["container_spec"] == spec.digest()
    # A warm writer's groups (image and facts known) are the same groups.
    assert groups_given(paths, host, state, config, IMAGE, host.facts()) == groups

    # The same host, its forwarded socket for the writer elsewhere (another url's
    # socket directory), or its volumes under another directory: another spec runs.
    moved_socket = MemoryHost("th", images=(IMAGE,), socket_dir="/run/user/1001/writerpool")
    moved_volumes = MemoryHost("th", images=(IMAGE,), volume_dir="/data/volumes")
    for other in (moved_socket, moved_volumes):
        changed = fingerprint_groups(paths, other, state, config)
        assert changed["container_spec"] != groups["container_spec"]
        assert {k for k in groups if groups[k] != changed[k]} == {"container_spec"}

    ready = save_state(
        paths.writer_dir(state.name),
        state.model_copy(update={"phase": "ready", "fingerprint": fingerprint_of(groups)}),
    )
    assert readiness(paths, host, ready, config) == ("ready", None)
    assert readiness(paths, moved_socket, ready, config) == ("not_ready", "writer_acceptance_stale")


def _without_harness(spec: ContainerSpec) -> ContainerSpec:
    env = {k: v for k, v in spec.env.items() if not k.startswith("WRITERPOOL_HARNESS_")}
    return spec.model_copy(update={"env": env})


def test_acceptance_runs_the_very_spec_each_session_of_the_writer_gets() -> None:
    paths, config = Paths.from_env(), Config(pool=Pool())
    pool = config.pool
    host = MemoryHost("th", images=(IMAGE,))
    state = _writer(paths, host)
    session = session_spec(paths, host, state, pool)  # what every session's slot runs
    for _ in range(2):  # twice: nothing of one run (a session id) is in the spec
        _, finding = accept(paths, host, load_state(paths.writer_dir(state.name)) or state, config)
        assert finding.code == "acceptance_harness_failed"  # nothing runs in memory
    assert [command for _, command in host.ran] == [["python3", HARNESS]] * 2
    ran = [_without_harness(spec) for spec, _ in host.ran]
    assert ran == [session, session]
    assert ran[0].digest() == fingerprint_groups(paths, host, state, config)["container_spec"]
    # Through the host: the proxy's socket forwarded under the writer's name, and the
    # agent directory (the canary's token pointing at that proxy) written there.
    assert host.forwarded == [state.name, state.name]
    models = json.loads(host.agent_files[state.name]["models.json"])
    assert models["providers"]["acceptance"]["baseUrl"].startswith("http://127.0.0.1:")
    assert _controller_paths(ran[0], paths) == []


def test_a_writer_on_a_host_without_its_image_is_not_ready_by_that_hosts_code() -> None:
    paths, config = Paths.from_env(), Config(pool=Pool())
    host = MemoryHost("th", images=(IMAGE,))
    state = _writer(paths, host, network="none")
    ready = state.model_copy(update={"phase": "ready", "fingerprint": "sha256:" + "0" * 64})
    assert readiness(paths, MemoryHost("th"), ready, config) == ("not_ready", "image_unavailable")
