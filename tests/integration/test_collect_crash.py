"""Collect killed with SIGKILL at several points: state stays readable, nothing is lost,
and the next collect completes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    run_agent,
    show,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp, writer_containers
from tests.support import procs
from tests.support.repos import git_out, make_repo
from writerpool.config.paths import Paths
from writerpool.crash import ENV as CRASH_ENV
from writerpool.crash import POINTS as CRASH_POINTS

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

# A large untracked file keeps the bundle and the import busy long enough to be hit.
WORK = """
git checkout -q -b feature && echo f > f.txt && git add f.txt && git commit -q -m feature
head -c 40000000 /dev/urandom > big.bin
"""


def _group_runs(pgid: int, needle: bytes) -> bool:
    """Whether a process of group `pgid` has `needle` in its command line."""
    return any(p.group == pgid and needle in b"\0".join(p.argv) for p in procs.mine())


def _bundle_kept(name: str) -> Callable[[int], bool]:
    collections = Paths.from_env().writer_dir(name) / "collections"
    before = set(collections.glob("*.bundle"))
    return lambda _pgid: bool(set(collections.glob("*.bundle")) - before)


def _receiving(name: str) -> Callable[[int], bool]:
    """The bundle is arriving on the controller: part of it is in the incoming directory."""
    collections = Paths.from_env().writer_dir(name) / "collections"
    return lambda _pgid: any(
        p.stat().st_size > 0 for p in collections.glob(".incoming-*/collect.bundle")
    )


def _kill_when(name: str, trigger: Callable[[int], bool] | str, timeout: float = 120) -> bool:
    """Start `writer collect --apply`, SIGKILL its process group when trigger fires, or
    let it kill itself at a named crash point (writerpool/crash.py).

    Returns whether the kill hit a running collect (False: it had already finished).
    """
    env = dict(os.environ)
    if isinstance(trigger, str):
        env[CRASH_ENV] = trigger
    proc = subprocess.Popen(
        [sys.executable, "-m", "writerpool", "writer", "collect", name, "--apply", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    if isinstance(trigger, str):
        proc.wait(timeout)
        if proc.returncode == -signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError):  # what it had started goes too
                os.killpg(proc.pid, signal.SIGKILL)
            return True
        return False
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline and not trigger(proc.pid):
        time.sleep(0.005)
    alive = proc.poll() is None
    if alive:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return alive


def _named(point: str) -> Callable[[], str]:
    return lambda: point


def test_collect_killed_anywhere_then_the_next_collect_completes(
    tmp_path: Path, image_pin: Path
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=10, files=5)
    alias = unique_alias("crash")
    write_workspaces({alias: repo})
    writer = ready_writer(alias)
    run_agent(writer, WORK)
    container = f"writerpool-{writer}-inspect".encode()
    # What the collect is seen doing, and named points it kills itself at: never a delay,
    # which would land elsewhere on a busier host.
    points: dict[str, Callable[[], Callable[[int], bool] | str]] = {
        "inspecting": lambda: lambda pgid: _group_runs(pgid, container),
        "streaming the bundle": lambda: _receiving(writer),
        "bundle kept": lambda: _bundle_kept(writer),
        "importing": lambda: lambda pgid: _group_runs(pgid, b"fetch"),
        **{point: _named(point) for point in CRASH_POINTS if point.startswith("collect.")},
    }
    hits = []
    for round_number, (point, trigger) in enumerate(points.items()):
        run_agent(writer, f"echo 'round {round_number}' >> rounds.txt")
        if _kill_when(writer, trigger()):
            hits.append(point)
        state = state_of(writer)  # readable, whatever the point
        assert state.baseline is not None
        code, report = wp("writer", "collect", writer, "--apply")
        assert code == 0 and "writer_collected" in codes(report), (point, report)
        got = collected(repo, writer)
        assert got["feature"] == git_out(clone_of(writer), "rev-parse", "feature")
        assert f"round {round_number}" in show(repo, f"{got['feature-wip']}:rounds.txt")
        state = state_of(writer)
        assert state.collection is not None and state.collection.complete
        assert writer_containers(writer) == []
        incoming = Paths.from_env().writer_dir(writer) / "collections"
        assert not list(incoming.glob(".incoming-*"))
    print(f"\nkills that landed mid-collect: {hits}")
    assert len(hits) >= 3, f"too few kills landed mid-collect: {hits}"
