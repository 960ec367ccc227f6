"""The everyday loop on real Podman and git: leftovers never block a session, writers
follow their base at lease, and a fix round's writer is leasable for its base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    run_agent,
    state_of,
    tree_files,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp
from tests.support.repos import commit_file, git_out, make_repo, run_git
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.claims.lease_ready import WriterSlot, lease_ready_writer

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

# What a test run leaves: byte code, a tool cache, an empty directory; all ignored.
TEST_RUN = """
mkdir -p src/__pycache__ .pytest_cache/v empty-dir
echo code > src/__pycache__/m.cpython-313.pyc
echo 1 > .pytest_cache/v/lastfailed
"""


@pytest.fixture
def alias() -> str:
    return unique_alias("loop")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=4, files=3)
    commit_file(checkout, ".gitignore", "__pycache__/\n.pytest_cache/\n", "ignore caches")
    write_workspaces({alias: checkout})
    return checkout


def _row(name: str) -> dict[str, Any]:
    code, report = wp("writer", "status", name)
    assert code == 0, report
    [row] = report["data"]["writers"]
    row["text"] = report["findings"][0]["message"]
    row["remedy"] = report["findings"][0].get("remedy", "")
    return dict(row)


def _lease(alias: str, base: str | None = None) -> WriterSlot:
    paths = Paths.from_env()
    return lease_ready_writer(paths, load_config(paths), alias, base)


def _audited(writer: str) -> list[str]:
    log = Paths.from_env().audit_log
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [line["outcome"] for line in lines if line["action"] == "lease"
            and line["writer"] == writer]  # fmt: skip


def test_leftovers_of_a_test_run_are_removed_at_lease_and_work_still_blocks(
    repo: Path, alias: str
) -> None:
    writer = ready_writer(alias)
    run_agent(writer, TEST_RUN)
    row = _row(writer)
    assert row["leasable"] and row["state"] == "writer_leasable", row
    assert row["atLease"]["moveTo"] is None and row["atLease"]["leftovers"], row
    assert "at lease: removes leftovers" in row["text"] and "ignored file(s)" in row["text"]

    slot = _lease(alias)
    try:
        assert slot.name == writer and "removes leftovers" in slot.prepared
        assert not (clone_of(writer) / "src" / "__pycache__").exists()
        assert not (clone_of(writer) / ".pytest_cache").exists()
        assert not (clone_of(writer) / "empty-dir").exists()
    finally:
        slot.release()
    assert _audited(writer) == ["writer_leftovers_removed"]
    row = _row(writer)
    assert row["leasable"] and row["atLease"] is None and row["atBaseline"] is True, row

    # Work is not a leftover: an untracked file still blocks, exactly as before.
    run_agent(writer, TEST_RUN + "echo draft > draft.txt\n")
    row = _row(writer)
    assert row["state"] == "writer_holds_work", row
    assert row["next"].startswith(f"writerpool writer diff {writer} --wip --stat"), row
    with pytest.raises(WriterpoolError) as caught:
        _lease(alias)
    assert caught.value.code == "writer_unavailable"
    assert (clone_of(writer) / "draft.txt").read_text() == "draft\n"
    assert (clone_of(writer) / "src" / "__pycache__").exists(), "nothing is cleaned with work"


def test_a_writer_follows_its_base_at_lease(repo: Path, alias: str) -> None:
    writer = ready_writer(alias, writers=2)
    other = f"{alias}-w2"
    old = state_of(writer).base.commit
    run_agent(other, "git checkout -q -b mine && git commit -q --allow-empty -m mine")
    commit_file(repo, "next.txt", "next\n", "main moves on")
    commit_file(repo, "later.txt", "later\n", "and again")
    new = git_out(repo, "rev-parse", "main")
    row = _row(writer)
    assert row["leasable"] and row["behind"] == 2, row
    assert row["atLease"]["moveTo"] == new and "behind main by 2" in row["text"], row
    held = _row(other)
    assert held["state"] == "writer_holds_work" and "behind main by 2" in held["text"], held

    slot = _lease(alias)
    try:
        assert (slot.name, slot.base_commit) == (writer, new)
        assert "moves it to main" in slot.prepared
    finally:
        slot.release()
    state = state_of(writer)
    assert state.base.commit == new and state.baseline is not None
    assert state.baseline.commit == new != old
    assert (clone_of(writer) / "later.txt").read_text() == "later\n"
    assert _audited(writer) == ["writer_base_followed"]
    row = _row(writer)
    assert row["behind"] == 0 and row["atLease"] is None and "behind" not in row["text"]
    # The writer holding work was left alone, still on the old commit.
    assert state_of(other).base.commit == old


def test_a_fix_round_writer_is_leasable_for_its_base(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_git(repo, "branch", "fix", "main~1")
    code, report = wp("writer", "reset", writer, "--base", "fix", "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    row = _row(writer)
    start = f'pi_session_start {{"workspace": "{alias}", "base": "fix"}}'
    back = f"writerpool writer finish {writer} --apply"
    assert row["leasable"] and row["base"] == "fix" and row["next"].startswith(start), row
    assert back in row["next"] and "--base main" not in row["next"], row
    assert row["text"].startswith(f"leasable for sessions on base fix: {start}"), row

    with pytest.raises(WriterpoolError) as caught:
        _lease(alias)  # the workspace's base: this writer is on fix
    assert caught.value.code == "writer_unavailable" and "on base fix" in caught.value.message
    with pytest.raises(WriterpoolError) as missing:
        _lease(alias, "no-such-branch")
    assert missing.value.code == "writer_base_unavailable", missing.value.message
    slot = _lease(alias, "fix")
    try:
        assert (slot.name, slot.base_ref) == (writer, "fix")
    finally:
        slot.release()


# Commits only a tag (annotated or not) or a ref holding a tag object reaches: work.
KEPT_BY_TAGS = """
base=$(git symbolic-ref -q --short HEAD)
git checkout -q --detach
git commit -q --allow-empty -m only-a-tag && git tag only-tag
git commit -q --allow-empty -m only-annotated && git tag -a -m keep only-annotated
git commit -q --allow-empty -m only-a-ref && git tag -a -m keep aside
git update-ref refs/keep/aside "$(git rev-parse aside)" && git tag -d aside
git checkout -q "$base"
"""


def test_commits_only_tags_reach_are_work_the_lease_never_removes(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, KEPT_BY_TAGS)
    row = _row(writer)
    assert row["state"] == "writer_holds_work" and not row["leasable"], row
    with pytest.raises(WriterpoolError) as caught:
        _lease(alias)
    assert caught.value.code == "writer_unavailable"
    kept = run_agent(writer, "git for-each-ref --format='%(refname)' refs/tags refs/keep")
    assert kept.split() == ["refs/keep/aside", "refs/tags/only-annotated", "refs/tags/only-tag"]
    code, report = wp("writer", "collect", writer, "--apply")
    unexportable = [f for f in report["findings"] if f["code"] == "writer_work_unexportable"]
    assert sorted(f["data"]["name"] for f in unexportable) == [
        "refs/keep/aside",
        "refs/tags/only-annotated",
        "refs/tags/only-tag",
    ], report


def test_an_ignored_file_added_with_force_is_work_the_lease_never_removes(
    repo: Path, alias: str
) -> None:
    writer = ready_writer(alias)
    run_agent(writer, TEST_RUN + "echo wanted > src/__pycache__/kept.txt\n"
              "git add -f src/__pycache__/kept.txt\n")  # fmt: skip
    row = _row(writer)
    assert row["state"] == "writer_holds_work" and not row["leasable"], row
    with pytest.raises(WriterpoolError) as caught:
        _lease(alias)
    assert caught.value.code == "writer_unavailable"
    assert (clone_of(writer) / "src" / "__pycache__" / "kept.txt").read_text() == "wanted\n"
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0, report
    [wip] = [c for name, c in collected(repo, writer).items() if name.endswith("-wip")]
    files = tree_files(repo, wip)
    assert "src/__pycache__/kept.txt" in files and "src/__pycache__/m.cpython-313.pyc" not in files


# 200 refs that reach no new history, sorted before one that does.
KEPT_BEHIND_MANY = """
base=$(git symbolic-ref -q --short HEAD)
for i in $(seq 200); do echo "create refs/a/$i HEAD"; done | git update-ref --stdin
git checkout -q --detach && git commit -q --allow-empty -m kept-behind-many
git update-ref refs/zz/kept HEAD && git tag kept-tag && git checkout -q "$base"
"""


def test_work_behind_many_refs_that_are_not_work_is_still_work(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, KEPT_BEHIND_MANY)
    row = _row(writer)
    assert row["state"] == "writer_holds_work" and not row["leasable"], row
    with pytest.raises(WriterpoolError) as caught:
        _lease(alias)
    assert caught.value.code == "writer_unavailable"
    kept = run_agent(writer, "git for-each-ref --format='%(refname)' refs/zz refs/tags")
    assert kept.split() == ["refs/tags/kept-tag", "refs/zz/kept"]
