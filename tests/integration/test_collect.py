"""Collection on real rootless Podman and real git: bundles out of a writer that an
agent-like script changed inside its real session container."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    refs_of,
    run_agent,
    show,
    snapshot,
    state_of,
    tree_files,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp, writer_containers
from tests.support.repos import git_out, make_repo
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.writer.inspect import at_baseline, inspect_writer
from writerpool.pool.writer.work import has_uncollected_work
from writerpool.runtime.hosts import open_host

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

TWO_BRANCHES_AND_WIP = """
git checkout -q -b feature-a
echo 'alpha' > a.txt && git add a.txt && git commit -q -m 'add a'
git checkout -q -b feature-b main
echo 'beta' > b.txt && git add b.txt && git commit -q -m 'add b'
echo 'changed by the agent' >> src/file-0001.txt
git rm -q src/file-0002.txt
echo 'staged' > staged.txt && git add staged.txt
echo 'not yet added' > untracked.txt
mkdir -p notes && echo 'todo' > notes/todo.md
"""


@pytest.fixture
def alias() -> str:
    return unique_alias("col")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=20, files=5)
    write_workspaces({alias: checkout})
    return checkout


@pytest.fixture
def writer(repo: Path, alias: str) -> str:
    return ready_writer(alias)


def _uncollected(name: str) -> bool:
    paths = Paths.from_env()
    return has_uncollected_work(paths, open_host(), state_of(name), load_config(paths).config.pool)


def test_collect_imports_two_branches_and_a_wip_commit_and_leaves_the_clone_alone(
    repo: Path, writer: str
) -> None:
    run_agent(writer, TWO_BRANCHES_AND_WIP)
    clone = clone_of(writer)
    before_clone = snapshot(clone)
    before_checkout = snapshot(repo)
    operator_refs = refs_of(repo)

    code, plan = wp("writer", "collect", writer)
    assert code == 0 and "writer_collect_planned" in codes(plan), plan
    assert collected(repo, writer) == {}
    assert _uncollected(writer)

    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0, report
    assert codes(report) == ["writer_collected"]

    got = collected(repo, writer)
    assert set(got) == {"feature-a", "feature-b", "feature-b-wip"}
    assert got["feature-a"] == git_out(clone, "rev-parse", "feature-a")
    assert got["feature-b"] == git_out(clone, "rev-parse", "feature-b")
    wip = got["feature-b-wip"]
    assert git_out(repo, "rev-parse", f"{wip}^") == got["feature-b"]
    files = tree_files(repo, wip)
    assert {"b.txt", "staged.txt", "untracked.txt", "notes/todo.md"} <= set(files)
    assert "src/file-0002.txt" not in files
    assert "changed by the agent" in show(repo, f"{wip}:src/file-0001.txt")

    # The clone, its index included, is byte for byte (and mtime for mtime) unchanged.
    assert snapshot(clone) == before_clone
    # The operator's checkout got refs and objects only: no branch, no checkout, no merge.
    assert snapshot(repo / "src") == {
        k.removeprefix("src/"): v for k, v in before_checkout.items() if k.startswith("src/")
    }
    after = refs_of(repo)
    assert {k: v for k, v in after.items() if not k.startswith("refs/remotes/writer-")} == (
        operator_refs
    )
    assert git_out(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert writer_containers(writer) == []

    state = state_of(writer)
    assert state.collection is not None and state.collection.complete
    assert state.collection.bundle is not None
    bundle = Paths.from_env().writer_dir(writer) / "collections" / state.collection.bundle
    assert bundle.is_file()
    assert not _uncollected(writer)

    run_agent(writer, "echo 'more' >> a.txt 2>/dev/null || echo more > more.txt")
    assert _uncollected(writer), "new work must invalidate the collection"


def test_tags_are_not_collected_and_a_stash_is_reported(repo: Path, writer: str) -> None:
    run_agent(writer, "git tag agent-tag && git tag -a -m note agent-annotated")
    code, report = wp("writer", "collect", writer, "--apply")
    assert codes(report) == ["nothing_to_collect"]
    assert not _uncollected(writer), "tags are not work"

    run_agent(writer, "echo stashed >> src/file-0003.txt && git stash -q")
    code, report = wp("writer", "collect", writer, "--apply")
    assert "writer_stash_present" in codes(report)
    assert "nothing_to_collect" in codes(report)
    assert not any(k.startswith("refs/tags/agent") for k in refs_of(repo))
    assert _uncollected(writer), "a stash is never collected, so it blocks cleanup"


def test_detached_head_commits_are_collected(repo: Path, writer: str) -> None:
    run_agent(
        writer,
        "git checkout -q --detach && echo d > d.txt && git add d.txt && git commit -q -m detached",
    )
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0, report
    got = collected(repo, writer)
    assert got == {"detached-head": git_out(clone_of(writer), "rev-parse", "HEAD")}


def test_session_guard_sees_every_kind_of_change(repo: Path, writer: str) -> None:
    paths = Paths.from_env()
    pool = load_config(paths).config.pool

    def clean() -> bool:
        state = state_of(writer)
        assert state.baseline is not None
        return at_baseline(inspect_writer(paths, open_host(), state, pool), state.baseline)

    assert clean()
    run_agent(writer, "echo x > untracked.txt")
    assert not clean()
    run_agent(writer, "rm untracked.txt && git branch extra")
    assert not clean()
    run_agent(writer, "git branch -D -q extra && git checkout -q --detach")
    assert not clean()
    run_agent(writer, "git checkout -q main && echo y >> src/file-0000.txt && git stash -q")
    assert not clean()
    run_agent(writer, "git stash drop -q")
    # The refs are the baseline's again, but the reflogs those moves wrote are git state
    # a fresh clone lacks: only a reset (which needs no --discard for them) admits it.
    assert not clean()
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert clean()
