"""`uninstall` plans by default, removes nothing while a writer holds uncollected work,
and with --discard --apply leaves only the configuration file and the audit log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    ready_writer,
    run_agent,
    unique_alias,
)
from tests.integration.writers_support import (
    codes,
    snapshot_tree,
    wp,
    writer_containers,
)
from tests.integration.writers_support import write_workspaces as write_config
from tests.support.repos import make_repo
from writerpool.config.paths import Paths
from writerpool.pool.writer.lease import Lease, read_holder

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


def test_uninstall_guards_work_then_removes_what_writerpool_made(
    tmp_path: Path, image_pin: Path
) -> None:
    alias = unique_alias("gone")
    write_config({alias: make_repo(tmp_path / "checkout", commits=4, files=2)}, wait=2)
    writer = ready_writer(alias)
    run_agent(writer, "echo work > work.txt")
    paths = Paths.from_env()
    before = snapshot_tree(paths.state_dir)

    code, report = wp("uninstall", "--keep-images", "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected", "uninstall_refused"], report
    after = snapshot_tree(paths.state_dir)
    assert {k for k in after if not k.startswith("audit.log")} == before.keys()

    code, plan = wp("uninstall", "--discard")
    assert code == 0 and "uninstall_planned" in codes(plan), plan
    # This install recorded no image it built: none is chosen by its writerpool-* tag.
    assert "image_record_missing" in codes(plan), plan
    assert not any(" image " in f["message"] and " MB)" in f["message"]
                   for f in plan["findings"])  # fmt: skip
    assert paths.writer_dir(writer).joinpath("state.json").exists(), "a plan removes nothing"

    code, done = wp("uninstall", "--discard", "--keep-images", "--apply")
    assert code == 0, done
    assert not paths.writers_dir.exists() and not paths.modes_file.exists()
    assert sorted(p.name for p in paths.state_dir.iterdir()) == ["audit.log", "audit.log.lock"]
    assert paths.config_file.exists() and writer_containers(writer) == []


def test_uninstall_waits_once_for_every_busy_writer(tmp_path: Path, image_pin: Path) -> None:
    alias = unique_alias("busy")
    repo = make_repo(tmp_path / "checkout", commits=2, files=1)
    write_config({alias: repo}, wait=1)
    first = ready_writer(alias, writers=2)
    second = first.removesuffix("1") + "2"
    paths = Paths.from_env()
    held = {name: Lease(paths.writer_dir(name)) for name in (first, second)}
    for lease in held.values():
        lease.acquire(wait=0)
    try:
        # Both stay busy: the one wait ends with each of them named, with its holder.
        code, plan = wp("uninstall")
        busy = [f for f in plan["findings"] if f["code"] == "writer_busy"]
        assert [f["target"].rsplit("/", 1)[1] for f in busy] == [first, second], plan
        assert all(f"pid {os.getpid()}" in f["message"] for f in busy), busy
        # The first is freed only once the command holds the second: waiting for the
        # leases one after another, it would still be waiting out the first.
        write_config({alias: repo}, wait=30)
        held.pop(second).release()
        command = subprocess.Popen(
            [sys.executable, "-m", "writerpool", "uninstall", "--json"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for _ in range(1200):  # until the command names itself the second's holder
            holder = read_holder(paths.writer_dir(second))
            if (holder and holder.pid == command.pid) or command.poll() is not None:
                break
            time.sleep(0.05)
        held.pop(first).release()
        out, _ = command.communicate(timeout=600)
    finally:
        for lease in held.values():
            lease.release()
    plan = json.loads(out)
    assert command.returncode == 0 and "writer_busy" not in codes(plan), plan
