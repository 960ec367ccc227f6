"""A process named by its pid is named by its start time too: once a process ends its
number comes round again (every 32,768 processes on hosts with the default pid_max),
and whatever takes it must never be signalled as if it were the first."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from writerpool import proc
from writerpool.config.paths import Paths
from writerpool.service.control import stop
from writerpool.state import tokens
from writerpool.state.service_record import record_file, running


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process of this account that took the number of a service that died."""
    process = subprocess.Popen(["sleep", "600"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_record_names_the_process_that_wrote_it_not_its_number(
    bystander: subprocess.Popen[bytes],
) -> None:
    now = proc.started(bystander.pid)
    assert isinstance(now, int)
    assert proc.is_recorded_process({"pid": bystander.pid, "started": now})
    assert not proc.is_recorded_process({"pid": bystander.pid, "started": now - 1})
    assert proc.is_recorded_process({"pid": bystander.pid})  # an older writerpool's record
    assert not proc.is_recorded_process({"pid": True, "started": now})
    assert not proc.is_recorded_process({"pid": 1})


def test_service_stop_never_signals_a_process_that_took_a_dead_services_number(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    paths.service_dir.mkdir(parents=True)
    started = proc.started(bystander.pid)
    assert started is not None
    record = {"schema_version": 1, "pid": bystander.pid, "started": started - 1,
              "port": 8931, "url": "http://127.0.0.1:8931/mcp", "socket": "s"}  # fmt: skip
    record_file(paths).write_text(json.dumps(record))
    assert running(paths) is None
    report = stop(paths)
    assert (report.data["running"], report.codes()) == (False, ["service_stopped"])
    assert "not running" in report.findings[-1].message
    assert bystander.poll() is None  # never signalled


def test_a_leader_that_exited_stays_unreaped_until_its_group_was_signalled() -> None:
    """`exited` does not reap: the leader's number keeps naming its group, so the
    members it left behind can still be ended by it."""
    leader = proc.spawn([sys.executable, "-c", "import subprocess, sys; "
                         "child = subprocess.Popen(['sleep', '600']); print(child.pid)"],
                        stdin_pipe=False)  # fmt: skip
    with leader:  # its pipes closed, and reaped, however this ends
        assert leader.stdout is not None
        member = int(leader.stdout.readline())
        while not proc.exited(leader):  # bounded: it exits once it printed
            time.sleep(0.01)
        assert leader.returncode is None  # not reaped: still a zombie holding its number
        proc.signal_group(leader, signal.SIGKILL)
        assert leader.wait(30) == 0
    while _state(member) not in (b"Z", b""):  # bounded: SIGKILL ends it (or its reaper)
        time.sleep(0.01)


def test_a_leader_reaped_by_another_hand_has_its_group_left_alone() -> None:
    """Once its leader was reaped elsewhere, a group's number may be another's: nothing
    is signalled by it (a member it left behind outlives the call)."""
    leader = proc.spawn([sys.executable, "-c", "import subprocess, sys; "
                         "child = subprocess.Popen(['sleep', '600']); print(child.pid)"],
                        stdin_pipe=False)  # fmt: skip
    with leader:
        assert leader.stdout is not None
        member = int(leader.stdout.readline())
        try:
            os.waitpid(leader.pid, 0)  # behind the Popen's back: its returncode stays None
            proc.signal_group(leader, signal.SIGKILL)
            assert _state(member) not in (b"Z", b"")
        finally:
            os.kill(member, signal.SIGKILL)


def _state(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0]
    except FileNotFoundError:
        return b""


def test_a_killed_relays_token_is_pruned_though_its_pid_runs_again(
    tmp_path: Path, bystander: subprocess.Popen[bytes]
) -> None:
    """A relay's token is named by its pid and start time: another process that took
    the pid keeps nothing alive; a live relay's token stays."""
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    alive = tokens.relay_name(os.getpid())
    now = proc.started(bystander.pid)
    assert now is not None
    reused = f"{tokens.RELAY_PREFIX}{bystander.pid}-{now - 1}"
    for name in (alive, reused, "codex"):
        tokens.create(paths, name)
    tokens.prune_gone_relays(paths)
    assert sorted(tokens.load(paths)) == sorted([alive, "codex"])


def test_a_relay_whose_start_time_cannot_be_read_is_named_by_its_pid_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    monkeypatch.setattr(tokens, "started", lambda pid: None)  # no /proc to read
    alive = tokens.relay_name(os.getpid())
    assert alive == f"{tokens.RELAY_PREFIX}{os.getpid()}"
    tokens.create(paths, alive)
    monkeypatch.undo()  # the prune reads /proc as usual: the pid runs, so it stays
    tokens.prune_gone_relays(paths)
    assert list(tokens.load(paths)) == [alive]
