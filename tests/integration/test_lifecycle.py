"""Reset, recreate, finish and remove on real rootless Podman and real git: none of them
loses work that no complete collection covers, unless --discard says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    clone_of,
    collected,
    ready_writer,
    refs_of,
    run_agent,
    snapshot,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp, writer_containers
from tests.support.repos import git_out, make_repo, run_git
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.writer.inspect import at_baseline, inspect_writer
from writerpool.runtime.hosts import open_host

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

WORK = """
git checkout -q -b feature && echo f > f.txt && git add f.txt && git commit -q -m feature
echo 'uncommitted' >> src/file-0001.txt
"""


@pytest.fixture
def alias() -> str:
    return unique_alias("life")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=12, files=4)
    write_workspaces({alias: checkout})
    return checkout


def _at_baseline(name: str) -> bool:
    paths = Paths.from_env()
    state = state_of(name)
    assert state.baseline is not None
    pool = load_config(paths).config.pool
    return at_baseline(inspect_writer(paths, open_host(), state, pool), state.baseline)


def _heads(name: str) -> list[str]:
    return sorted(os.listdir(clone_of(name) / ".git" / "refs" / "heads"))


def test_reset_recreate_and_remove_refuse_uncollected_work(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, WORK)
    before = snapshot(clone_of(writer))
    for command in (
        ["reset"],
        ["recreate"],
        ["reset", "--apply"],
        ["recreate", "--apply"],
        ["remove"],
    ):
        code, report = wp("writer", command[0], writer, *command[1:])
        assert code == 1 and codes(report) == ["writer_uncollected"], (command, report)
    assert snapshot(clone_of(writer)) == before
    assert state_of(writer).name == writer

    code, report = wp("writer", "collect", writer, "--apply")
    assert codes(report) == ["writer_collected"]
    code, report = wp("writer", "reset", writer)
    assert code == 0 and codes(report) == ["writer_reset_planned"]
    assert snapshot(clone_of(writer)) == before, "a plan changes nothing"
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert _heads(writer) == ["main"] and _at_baseline(writer)
    assert state_of(writer).collection is None

    agent_dir = Paths.from_env().writer_dir(writer) / "agent"
    (agent_dir / "session-leftover.json").write_text("{}")
    run_agent(writer, "echo new > new.txt")
    code, report = wp("writer", "recreate", writer, "--apply")
    assert code == 1 and codes(report) == ["writer_uncollected"]
    assert (clone_of(writer) / "new.txt").exists()
    wp("writer", "collect", writer, "--apply", check=True)
    code, report = wp("writer", "recreate", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_recreated"], report
    assert not (clone_of(writer) / "new.txt").exists()
    assert list(agent_dir.iterdir()) == []
    assert _at_baseline(writer)

    run_agent(writer, "git checkout -q -b late && git commit -q --allow-empty -m late")
    code, report = wp("writer", "remove", writer)
    assert code == 1 and codes(report) == ["writer_uncollected"]
    code, report = wp("writer", "remove", writer, "--discard")
    assert code == 0 and codes(report) == ["writer_uncollected", "writer_remove_planned"]
    assert clone_of(writer).exists(), "remove plans until --apply"
    code, report = wp("writer", "remove", writer, "--discard", "--apply")
    assert code == 0 and codes(report) == ["writer_uncollected", "writer_removed"], report
    assert not (Paths.from_env().writer_dir(writer) / "state.json").exists()
    assert not clone_of(writer).exists()
    assert writer_containers(writer) == []


def test_a_clean_writer_needs_no_discard(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    # Tags are not work, and a detached HEAD on the base commit holds nothing new.
    run_agent(writer, "git tag agent-made && git checkout -q --detach")
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    code, report = wp("writer", "remove", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_removed"], report


def test_discarding_reset_clears_branches_stash_tags_and_untracked_files(
    repo: Path, alias: str
) -> None:
    writer = ready_writer(alias)
    run_agent(
        writer,
        WORK
        + """
git stash -q
git tag agent-tag
git checkout -q -b other main && echo o > o.txt
mkdir -p build && echo junk > build/out.o && echo 'build/' > .gitignore
mkdir -p locked/sub && touch locked/sub/file && chmod 555 locked/sub locked
git checkout -q --detach
""",
    )
    code, plan = wp("writer", "reset", writer, "--discard")
    assert code == 0 and codes(plan) == ["writer_uncollected", "writer_reset_planned"], plan
    # A plan discards nothing, and says so.
    said = plan["findings"][0]["message"]
    assert "--apply will discard" in said and "discarded as asked" not in said, said
    code, report = wp("writer", "reset", writer, "--discard", "--apply")
    assert code == 0 and codes(report) == ["writer_uncollected", "writer_reset"], report
    assert "discarded as asked" in report["findings"][0]["message"]
    clone = clone_of(writer)
    assert _heads(writer) == ["main"]
    assert os.listdir(clone / ".git" / "refs" / "tags") == []
    assert not (clone / ".git" / "refs" / "stash").exists()
    assert not (clone / "build").exists() and not (clone / "o.txt").exists()
    assert not (clone / "locked").exists()
    assert git_out(clone, "rev-parse", "HEAD") == git_out(repo, "rev-parse", "main")
    assert _at_baseline(writer)


def test_finish_collects_then_resets_a_persistent_writer(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, WORK)
    code, report = wp("writer", "finish", writer)
    assert code == 0 and codes(report) == ["writer_collect_planned", "writer_finish_planned"]
    assert collected(repo, writer) == {}
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_collected", "writer_reset"], report
    assert set(collected(repo, writer)) == {"feature", "feature-wip"}
    assert _heads(writer) == ["main"] and _at_baseline(writer)
    # Finished means admitted again: the guard passes and a new session could start.
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 0 and codes(report) == ["nothing_to_collect", "writer_reset"], report


def test_finish_collects_then_recreates_an_ephemeral_writer(repo: Path, alias: str) -> None:
    writer = ready_writer(alias, lifecycle="ephemeral")
    run_agent(writer, WORK)
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_collected", "writer_recreated"], report
    assert set(collected(repo, writer)) == {"feature", "feature-wip"}
    assert _at_baseline(writer)


def test_finish_stops_on_a_stash(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, WORK + "git stash -q")
    code, report = wp("writer", "finish", writer, "--apply")
    assert code == 1
    assert codes(report) == ["writer_stash_present", "writer_collected", "writer_uncollected"]
    assert (clone_of(writer) / ".git" / "refs" / "stash").exists()


def test_fix_round_resets_onto_a_collected_branch(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, WORK)
    wp("writer", "collect", writer, "--apply", check=True)
    fix = collected(repo, writer)["feature"]
    run_git(repo, "branch", "fix", fix)
    code, report = wp("writer", "reset", writer, "--base", "fix", "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    state = state_of(writer)
    assert state.base.name == "fix" and state.base.commit == fix
    assert git_out(clone_of(writer), "symbolic-ref", "HEAD") == "refs/heads/fix"
    assert _heads(writer) == ["fix"] and _at_baseline(writer)

    run_agent(writer, "echo fixed >> f.txt && git commit -q -am 'fix it'")
    code, report = wp("writer", "finish", writer, "--apply")
    # The new collection adds fix; the writer's earlier review ref (feature) stays.
    expected = ["writer_collected", "review_refs_kept", "writer_reset"]
    assert code == 0 and codes(report) == expected, report
    assert git_out(repo, "rev-parse", f"refs/remotes/writer-{writer}/fix^") == fix
    assert state_of(writer).base.name == "main", "finish returns to the workspace base"
    assert "refs/heads/fix" in refs_of(repo)


def test_reset_keeps_the_selected_base_tags_only(repo: Path, alias: str) -> None:
    run_git(repo, "tag", "-a", "-m", "release", "v1", "main~2")
    writer = ready_writer(alias, tags="reachable")
    run_agent(writer, "git tag agent-tag && git tag -d v1")
    code, report = wp("writer", "reset", writer, "--apply")
    assert code == 0 and codes(report) == ["writer_reset"], report
    assert os.listdir(clone_of(writer) / ".git" / "refs" / "tags") == ["v1"]
