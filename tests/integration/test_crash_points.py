"""SIGKILL at every named crash point of provision, acceptance, mode set, collect, reset,
recreate and finish (writerpool/crash.py). After each kill: state is readable, the next
run completes or refuses cleanly, and the planted work is intact (in the writer's clone
or collected into the checkout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_collect_helpers import (
    collected,
    ready_writer,
    run_agent,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, writer_containers
from tests.support.repos import make_repo
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.crash import ENV, POINTS
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.inspect import VIEW, inspect_writer
from writerpool.runtime.hosts import open_host
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

# Codes a rerun may refuse with after a kill: expected findings, never internal_error.
CLEAN_REFUSALS = {"writer_uncollected", "writer_reset_failed", "writer_recreate_failed"}


def wp(*args: str, crash: str | None = None) -> tuple[int, dict[str, Any] | None]:
    env = dict(os.environ)
    env.pop(ENV, None)
    if crash is not None:
        env[ENV] = crash
    done = subprocess.run(
        [sys.executable, "-m", "writerpool", *args, "--json"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == -9:
        return -9, None
    return done.returncode, json.loads(done.stdout)


def assert_readable(alias: str) -> None:
    """Every writer's state loads, and `writer list` answers with findings, not a bug."""
    paths = Paths.from_env()
    for wdir in paths.writers_dir.glob(f"{alias}-w*"):
        load_state(wdir)  # raises on a corrupt file
    code, report = wp("writer", "list")
    assert report is not None and code in (0, 1), report
    assert "internal_error" not in codes(report)


def plant(writer: str, label: str) -> str:
    """A commit of the agent's on branch `label`; returns its id."""
    run_agent(writer, f"git checkout -q -B {label} && echo {label} > {label}.txt && "
                      f"git add {label}.txt && git commit -q -m {label}")  # fmt: skip
    return branches(writer)[label]


def branches(writer: str) -> dict[str, str]:
    """The clone's branches as the inspection's container on the writer's host sees them
    (none when it cannot be inspected)."""
    paths = Paths.from_env()
    state = load_state(paths.writer_dir(writer))
    if state is None:
        return {}
    try:
        pool = load_config(paths).config.pool
        return inspect_writer(paths, open_host(), state, pool, VIEW).branches
    except WriterpoolError:
        return {}


def intact(repo: Path, writer: str, label: str, commit: str) -> bool:
    in_clone = branches(writer).get(label) == commit
    return in_clone or collected(repo, writer).get(label) == commit


def crash_then_rerun(alias: str, point: str, *args: str) -> dict[str, Any]:
    code, _ = wp(*args, crash=point)
    assert code == -9, f"{point} was never reached by {args}"
    assert_readable(alias)
    code, report = wp(*args)
    assert report is not None
    found = set(codes(report))
    if code != 0:
        assert code == 1 and found & CLEAN_REFUSALS, (point, report)
        assert "internal_error" not in found
        if "--apply" in args and "writer_uncollected" in found and "--discard" not in args:
            # Refused because the kill left the clone ahead of its record: the operator
            # may collect, then the command completes.
            writer = args[2]
            assert wp("writer", "collect", writer, "--keep-old", "--apply")[0] == 0
            code, report = wp(*args)
            assert report is not None and code == 0, (point, report)
    return report


def test_sigkill_at_every_crash_point_loses_nothing(tmp_path: Path, image_pin: Path) -> None:
    repo = make_repo(tmp_path / "checkout", commits=3, files=3)
    alias = unique_alias("kill")
    write_workspaces({alias: repo})
    w1, w2 = ready_writer(alias), f"{alias}-w2"
    mode = ("mode", "set", alias, "container", "--profiles", "code", "--network", "none")
    kept = {"first": plant(w1, "first")}
    hit: list[str] = []

    def check_kept() -> None:
        for label, commit in kept.items():
            assert intact(repo, w1, label, commit), label

    # Growing the pool to two writers: provision, acceptance and mode set points.
    for point in POINTS[:5]:
        report = crash_then_rerun(alias, point, *mode, "--writers", "2", "--apply")
        assert (
            codes(report).count("writer_accepted") + codes(report).count("writer_unchanged") == 2
        ), (point, report)
        hit.append(point)
        check_kept()
        wp(*mode, "--writers", "1", "--apply")  # drop w2 again (it holds no work)
        assert not (Paths.from_env().writer_dir(w2) / "clone").exists()
    # Collection: each round plants new work first. --keep-old keeps every round's review
    # refs in the checkout, so all the work planted so far can be checked there.
    for point in ("collect.bundle_kept", "collect.imported"):
        kept[point.split(".")[1]] = plant(w1, point.split(".")[1])
        report = crash_then_rerun(alias, point, "writer", "collect", w1, "--keep-old", "--apply")
        assert "writer_collected" in codes(report), (point, report)
        hit.append(point)
        check_kept()
    # Reset and recreate of collected work: nothing may be lost either.
    for point, command in (
        ("reset.tool_ran", "reset"),
        ("reset.verified", "reset"),
        ("recreate.cloned", "recreate"),
    ):
        label = point.replace(".", "-")
        kept[label] = plant(w1, label)
        assert wp("writer", "collect", w1, "--keep-old", "--apply")[0] == 0
        report = crash_then_rerun(alias, point, "writer", command, w1, "--apply")
        assert {"writer_reset", "writer_recreated"} & set(codes(report)), (point, report)
        hit.append(point)
        for name, commit in kept.items():
            assert collected(repo, w1).get(name) == commit, (point, name)
    # Finish collects, then resets: killed in between, the work is already collected.
    kept["finish"] = plant(w1, "finish")
    report = crash_then_rerun(alias, "finish.collected", "writer", "finish", w1, "--apply")
    assert "writer_reset" in codes(report), report
    hit.append("finish.collected")
    assert collected(repo, w1).get("finish") == kept["finish"]
    assert writer_containers(w1) == [] and writer_containers(w2) == []
    assert sorted(hit) == sorted(POINTS), "every crash point is exercised"
    print(f"\ncrash points killed and recovered: {len(hit)}")
