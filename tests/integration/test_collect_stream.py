"""Collection's stream on real rootless Podman and real git: the bundle comes out of the
writer's throwaway container on its stdout, bounded by `[pool] collect_max_bundle_bytes`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    run_agent,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp, writer_containers
from tests.support.repos import git_out, make_repo
from writerpool.config.paths import Paths

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

# Random bytes do not compress: the bundle is larger than the cap below.
BIG_COMMIT = """
git checkout -q -b feature
head -c 300000 /dev/urandom > big.bin && git add big.bin && git commit -q -m big
"""


def _set_bundle_cap(value: int) -> None:
    config = Paths.from_env().config_file
    lines = [
        line
        for line in config.read_text().splitlines()
        if not line.startswith("collect_max_bundle_bytes")
    ]
    # [pool] is the file's last table.
    config.write_text("\n".join([*lines, f"collect_max_bundle_bytes = {value}"]) + "\n")


def test_a_bundle_above_its_cap_is_refused_and_changes_nothing(
    tmp_path: Path, image_pin: Path
) -> None:
    repo = make_repo(tmp_path / "checkout", commits=5, files=3)
    alias = unique_alias("cap")
    write_workspaces({alias: repo})
    writer = ready_writer(alias)
    run_agent(writer, BIG_COMMIT)
    _set_bundle_cap(100_000)
    before = state_of(writer)

    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 1 and codes(report) == ["collect_bundle_too_large"], report
    assert collected(repo, writer) == {}
    assert state_of(writer) == before
    collections = Paths.from_env().writer_dir(writer) / "collections"
    assert sorted(p.name for p in collections.iterdir()) == []
    assert writer_containers(writer) == []

    _set_bundle_cap(10_000_000)
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_collected"], report
    assert collected(repo, writer) == {"feature": git_out(clone_of(writer), "rev-parse", "feature")}
    state = state_of(writer)
    assert state.collection is not None and state.collection.complete
