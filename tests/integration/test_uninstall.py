"""`uninstall` plans by default, removes nothing while a writer holds uncollected work,
and with --discard --apply leaves only the configuration file and the audit log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    ready_writer,
    run_agent,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, snapshot_tree, wp, writer_containers
from tests.support.repos import make_repo
from writerpool.config.paths import Paths

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


def test_uninstall_guards_work_then_removes_what_writerpool_made(
    tmp_path: Path, image_pin: Path
) -> None:
    alias = unique_alias("gone")
    write_workspaces({alias: make_repo(tmp_path / "checkout", commits=4, files=2)})
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
    assert any(f["code"] == "uninstall_planned" and "image" in f["message"]
               for f in plan["findings"])  # fmt: skip
    assert paths.writer_dir(writer).joinpath("state.json").exists(), "a plan removes nothing"

    code, done = wp("uninstall", "--discard", "--keep-images", "--apply")
    assert code == 0, done
    assert not paths.writers_dir.exists() and not paths.modes_file.exists()
    assert sorted(p.name for p in paths.state_dir.iterdir()) == ["audit.log", "audit.log.lock"]
    assert paths.config_file.exists() and writer_containers(writer) == []
