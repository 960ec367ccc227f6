"""Collection from a writer on the test host over SSH: the bundle streams out of a
throwaway container there (its clone a volume of that host) and is imported here as
review refs, the same code as the local host's. A connection lost before or while the
bundle streams is writer_host_unreachable and changes nothing; the next collection over
a new connection completes. A reset there gets its base's bundle on its stdin the same
way provisioning does."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import collected
from tests.integration.test_provision_stream import _in_clone_rw, _provision
from tests.integration.test_remote_host import _forwarder_pid
from tests.integration.writers_support import codes, wp, write_workspaces
from tests.support.cli import run_cli
from tests.support.repos import make_repo
from tests.support.testhost import add_host, send_image
from writerpool.config.hosts import HostConfig
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.pool.collect.export import collect_writer
from writerpool.pool.provision.rebuild import reset_clone
from writerpool.pool.writer.baseline import writer_problems
from writerpool.pool.writer.inspect import tool_spec
from writerpool.report import Report
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.state.writer import WriterState, load_state, save_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.remote]

# Committed as the agent would; random bytes keep the bundle large enough to be cut.
WORK = (
    "cd /work; g='git -c safe.directory=* -c user.name=a -c user.email=a@a.test'; "
    "$g checkout -q -b feature; head -c {size} /dev/urandom > big.bin; $g add big.bin; "
    "$g commit -q -m big; echo wip > wip.txt"
)


@pytest.fixture
def remote_writer(
    tmp_path: Path, image_pin: Path, testhost: HostConfig
) -> Iterator[tuple[Path, WriterState]]:
    """A writer provisioned on the test host, its workspace configured here."""
    repo = make_repo(tmp_path / "checkout", commits=3, files=2)
    with connect("th", testhost) as remote:
        send_image(remote, image_pin)
        state, baseline, _ = _provision(remote, repo)
    state = state.model_copy(update={"baseline": baseline})
    write_workspaces({state.alias: repo})
    save_state(Paths.from_env().writer_dir(state.name), state)
    saved = load_state(Paths.from_env().writer_dir(state.name))  # as recorded, stamped
    assert saved is not None
    try:
        yield repo, saved
    finally:
        with connect("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), state.name, remote.name))


def _collect(remote: RemotePodman, state: WriterState) -> Report:
    report = Report("writer collect")
    paths = Paths.from_env()
    collect_writer(paths, remote, load_config(paths), state, report)
    return report


def _unchanged(repo: Path, state: WriterState) -> None:
    """Nothing imported, nothing recorded, no bundle kept."""
    paths = Paths.from_env()
    assert collected(repo, state.name) == {}
    assert load_state(paths.writer_dir(state.name)) == state
    kept = paths.writer_dir(state.name) / "collections"
    assert not kept.is_dir() or list(kept.iterdir()) == []


def _cut_when_streaming(
    remote: RemotePodman, state: WriterState
) -> tuple[threading.Event, threading.Event]:
    """Kill the SSH forward once part of the bundle has arrived here."""
    incoming = Paths.from_env().writer_dir(state.name) / "collections"
    stop, cut = threading.Event(), threading.Event()

    def watch() -> None:
        while not stop.wait(0.005):  # bounded: the collect ends, and `stop` is set
            if any(p.stat().st_size > 0 for p in incoming.glob(".incoming-*/collect.bundle")):
                os.kill(_forwarder_pid(remote.socket_path), signal.SIGKILL)
                cut.set()
                return

    threading.Thread(target=watch, daemon=True).start()
    return stop, cut


@pytest.mark.every_testhost
def test_a_remote_writers_work_is_collected_through_the_stream(
    remote_writer: tuple[Path, WriterState], testhost: HostConfig
) -> None:
    repo, state = remote_writer
    with connect("th", testhost) as remote:
        _in_clone_rw(remote, state, WORK.format(size=4096))
        report = _collect(remote, state)
        # The collect container's only mount is the clone volume of the host.
        spec = tool_spec(
            Paths.from_env(), remote, state, load_config(Paths.from_env()).config.pool, "inspect"
        )
        argv = spec.run_argv(["python3", "-m", "clonetool", "collect"], interactive=True)
    mounts = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--mount"]
    print("\ncollect container mounts:", mounts)
    assert mounts == [f"type=volume,src=writerpool-{state.name}-clone,dst=/work,ro=true"]
    assert [f.code for f in report.findings] == ["writer_collected"], report.findings
    got = collected(repo, state.name)
    assert set(got) == {"feature", "feature-wip"}
    recorded = load_state(Paths.from_env().writer_dir(state.name))
    assert recorded is not None and recorded.collection is not None
    assert recorded.collection.complete and recorded.host == "th"


def test_collect_on_an_unreachable_host_refuses_and_changes_nothing(
    remote_writer: tuple[Path, WriterState], testhost: HostConfig
) -> None:
    repo, state = remote_writer
    with connect("th", testhost) as remote:
        _in_clone_rw(remote, state, WORK.format(size=4096))
        os.kill(_forwarder_pid(remote.socket_path), signal.SIGKILL)
        with pytest.raises(WriterpoolError) as exc:
            _collect(remote, state)
        assert exc.value.code == "writer_host_unreachable"
        assert testhost.target.address not in exc.value.message
    _unchanged(repo, state)


def test_a_connection_killed_while_the_bundle_streams_changes_nothing_and_the_next_completes(
    remote_writer: tuple[Path, WriterState], testhost: HostConfig
) -> None:
    repo, state = remote_writer
    with connect("th", testhost) as remote:
        _in_clone_rw(remote, state, WORK.format(size=40_000_000))
        stop, cut = _cut_when_streaming(remote, state)
        try:
            with pytest.raises(WriterpoolError) as exc:
                _collect(remote, state)
        finally:
            stop.set()
        assert cut.is_set(), "the collect ended before any of the bundle arrived"
        assert exc.value.code == "writer_host_unreachable", exc.value.message
    _unchanged(repo, state)
    with connect("th", testhost) as again:
        report = _collect(again, state)
    assert [f.code for f in report.findings] == ["writer_collected"], report.findings
    assert set(collected(repo, state.name)) == {"feature", "feature-wip"}


def test_collect_and_finish_of_a_remote_writer_go_to_its_host_or_refuse_unreachable(
    remote_writer: tuple[Path, WriterState], testhost: HostConfig
) -> None:
    repo, state = remote_writer
    with connect("th", testhost) as remote:
        _in_clone_rw(remote, state, WORK.format(size=4096))
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    kept = config.read_text()
    target = testhost.target
    add_host(testhost, f"ssh://{target.user}@{target.address}:2{target.socket}")
    for command in (["collect"], ["finish"]):
        code, report = wp("writer", *command, state.name, "--apply")
        assert code == 1 and codes(report) == ["writer_host_unreachable"], report
        assert target.address not in json.dumps(report)
        _unchanged(repo, state)
    config.write_text(kept)
    add_host(testhost, testhost.url)
    # The operator's views read the clone on its host too.
    diff = run_cli("writer", "diff", state.name, "feature", "--stat")
    assert diff.code == 0 and "big.bin" in diff.out, diff.err[-2000:]
    code, report = wp("writer", "collect", state.name, "--apply")
    assert code == 0 and codes(report) == ["writer_collected"], report
    assert set(collected(repo, state.name)) == {"feature", "feature-wip"}


@pytest.mark.every_testhost
def test_a_remote_writer_is_reset_on_its_host_from_a_streamed_bundle(
    remote_writer: tuple[Path, WriterState], testhost: HostConfig
) -> None:
    repo, state = remote_writer
    paths = Paths.from_env()
    loaded = load_config(paths)
    with connect("th", testhost) as remote:
        _in_clone_rw(remote, state, WORK.format(size=64))
        report = Report("writer reset")
        after = reset_clone(paths, remote, loaded, state, resolve_base(repo, "main"), report)
        # Reset itself, not a fallback to recreate: its container had the clone volume
        # and the bundle on its stdin, nothing of this machine mounted.
        assert [f.code for f in report.findings] == ["writer_reset"], report.findings
        assert writer_problems(paths, remote, after, loaded.config.pool) == []
        spec = tool_spec(paths, remote, state, loaded.config.pool, "reset", clone_rw=True)
    assert spec.mounts == ()
    assert [v.volume for v in spec.volumes] == [f"writerpool-{state.name}-clone"]
