"""What the operator sees of each writer, through the CLI (run in the test's process):
`writer status` and `writer list` in the session guard's words, and the guard's refusal
as a reason."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_collect_helpers import (
    collected,
    ready_writer,
    run_agent,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp, wp_err
from tests.support.cli import run_cli
from tests.support.repos import git_out, make_repo, run_git
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.claims.lease_ready import lease_ready_writer
from writerpool.pool.writer.lease import leased

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

WORK = """
git checkout -q -b feature && echo f > f.txt && git add f.txt && git commit -q -m 'add f'
echo 'uncommitted' >> src/file-0001.txt
"""


@pytest.fixture
def alias() -> str:
    return unique_alias("view")


@pytest.fixture
def repo(tmp_path: Path, image_pin: Path, alias: str) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=6, files=3)
    write_workspaces({alias: checkout})
    return checkout


def _text(*args: str) -> str:
    done = run_cli(*args)
    assert done.code == 0, done.err
    return done.out


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in report["data"]["writers"]}


def test_status_names_work_collection_and_the_next_command(repo: Path, alias: str) -> None:
    ready_writer(alias, writers=2)
    w1, w2 = f"{alias}-w1", f"{alias}-w2"
    code, report = wp("writer", "status")
    assert code == 0 and set(codes(report)) == {"writer_leasable"}, report
    run_agent(w1, WORK)
    run_agent(w2, "echo note > note.txt")
    wp("writer", "collect", w2, "--apply", check=True)

    code, report = wp("writer", "status")
    rows = _rows(report)
    assert rows[w1]["state"] == "writer_holds_work" and not rows[w1]["leasable"]
    assert list(rows[w1]["work"]["changedBranches"]) == ["feature"]
    assert rows[w1]["work"]["uncommitted"] is True
    assert rows[w1]["next"].endswith(f"writerpool writer finish {w1} --apply")
    assert rows[w2]["state"] == "writer_collected_unfinished"
    assert rows[w2]["next"] == f"writerpool writer finish {w2} --apply"
    assert rows[w2]["work"]["collection"]["complete"] is True

    code, refused = wp("writer", "reset", w1)
    assert code == 1 and codes(refused) == ["writer_uncollected"]
    lost = refused["findings"][0]["data"]["wouldDiscard"]
    assert "branch(es) feature" in lost and "uncommitted" in lost, lost

    code, listed = wp("writer", "list")
    assert {n: r["state"] for n, r in _rows(listed).items()} == {
        n: r["state"] for n, r in rows.items()
    }
    code, one = wp("writer", "status", w2)
    assert list(_rows(one)) == [w2]
    code, unknown = wp("writer", "status", f"{alias}-w9")
    assert code == 2 and codes(unknown) == ["writer_unknown"]
    assert w1 in unknown["findings"][0]["message"] and w2 in unknown["findings"][0]["message"]

    paths = Paths.from_env()
    with pytest.raises(WriterpoolError) as caught:
        lease_ready_writer(paths, load_config(paths), alias, None)
    assert caught.value.code == "writer_unavailable"
    message = caught.value.message
    assert f"{w1} " in message and "writer_holds_work" in message, message
    assert "writer_collected_unfinished" in message and "/" not in message.split(":", 1)[1]

    wp("writer", "finish", w2, "--apply", check=True)
    with leased(paths.writer_dir(w2), 1.0):
        code, report = wp("writer", "status", w2)
        row = _rows(report)[w2]
        assert row["state"] == "writer_busy" and row["heldBy"]["pid"] > 0, row
        code, busy, said = wp_err("writer", "collect", w2)
        assert code == 1 and codes(busy) == ["writer_busy"], busy
        assert f"pid {os.getpid()}" in busy["findings"][0]["message"], busy
        # Before the wait, not after it: for whom and how long ([pool] lease_wait_seconds).
        assert said.startswith(f"writerpool: writer {w2} is held by pid {os.getpid()}: "), said
        wait = load_config(paths).config.pool.lease_wait_seconds
        assert f"waiting up to {wait:g} s for it" in said, said
    code, report = wp("writer", "status", w2)
    assert _rows(report)[w2]["state"] == "writer_leasable", report


EVIL = r"""
git checkout -q -b topic
printf 'x\n' > evil.txt && git add evil.txt
git commit -q -m "$(printf 'paint \033]0;owned\007\033[31mred\033[0m done')"
"""


def test_log_and_diff_show_the_agents_work_without_escape_sequences(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    code, report = wp("writer", "log", writer)
    assert code == 0 and report["data"]["commits"] == [], report
    run_agent(writer, WORK)
    run_agent(writer, EVIL)

    code, report = wp("writer", "log", writer, "feature")
    assert [c["subject"] for c in report["data"]["commits"]] == ["add f"], report
    code, report = wp("writer", "log", writer)
    subjects = [c["subject"] for c in report["data"]["commits"]]
    assert subjects == ["paint red done", "add f"], subjects
    text = _text("writer", "log", writer)
    assert "\x1b" not in text and "\x07" not in text and "paint red done" in text

    code, report = wp("writer", "diff", writer, "feature", "--stat")
    assert [(f["path"], f["added"]) for f in report["data"]["files"]] == [("f.txt", 1)]
    code, report = wp("writer", "diff", writer, "--stat")
    assert sorted(f["path"] for f in report["data"]["files"]) == ["evil.txt", "f.txt"]
    code, report = wp("writer", "diff", writer, "--wip", "--stat")
    assert [f["path"] for f in report["data"]["files"]] == ["src/file-0001.txt"], report
    patch = _text("writer", "diff", writer, "--wip")
    assert "+uncommitted" in patch
    stat = _text("writer", "diff", writer, "--stat")
    assert "2 file(s) changed, 2 insertion(s)" in stat, stat

    done = run_cli("writer", "diff", writer, "--json", "--", "-evil")
    assert done.code == 2 and '"usage_invalid"' in done.out, done
    code, report = wp("writer", "log", writer, "no-such-branch")
    assert code == 1 and codes(report) == ["writer_inspect_failed"], report


def test_a_new_collection_moves_the_ref_it_overwrites_aside_and_keeps_the_others(
    repo: Path, alias: str
) -> None:
    writer = ready_writer(alias)
    prefix = f"refs/remotes/writer-{writer}/"
    run_agent(writer, "git checkout -q -b topic && git commit -q --allow-empty -m one")
    wp("writer", "collect", writer, "--apply", check=True)
    first = collected(repo, writer)
    assert list(first) == ["topic"]
    wp("writer", "reset", writer, "--apply", check=True)

    # A name that nests under the earlier one: the earlier ref moves aside, not away.
    run_agent(writer, "git checkout -q -b topic/sub && git commit -q --allow-empty -m two")
    code, plan = wp("writer", "collect", writer)
    assert code == 0 and "review_refs_replaced" in codes(plan), plan
    # As a collection killed inside its move-aside leaves them: git refuses the next move
    # on them, so the next collection removes them first (never a lock elsewhere).
    planted = [repo / ".git" / f"{prefix}topic.lock", repo / ".git" / "refs/heads/other.lock"]
    for lock in planted:
        lock.write_text("")
        os.utime(lock, (time.time() - 60, time.time() - 60))
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0 and "review_ref_locks_removed" in codes(report), report
    assert not planted[0].exists() and planted[1].exists()
    planted[1].unlink()
    moved = next(f for f in report["findings"] if f["code"] == "review_refs_replaced")
    assert moved["status"] == "warning" and f"writer refs {writer} --prune" in moved["remedy"]
    [entry] = moved["data"]["replaced"]
    assert (entry["ref"], entry["commit"]) == (prefix + "topic", first["topic"])
    aside = entry["movedTo"]
    assert aside.startswith(f"refs/remotes/writer-{writer}@") and aside.endswith("/topic")
    assert git_out(repo, "rev-parse", aside) == first["topic"]
    assert list(collected(repo, writer)) == ["topic/sub"]
    assert state_of(writer).collection.refs == (prefix + "topic/sub",)  # type: ignore[union-attr]

    # Another branch's review ref stays where it is, listed.
    wp("writer", "reset", writer, "--apply", check=True)
    run_agent(writer, "git checkout -q -b third && git commit -q --allow-empty -m three")
    code, report = wp("writer", "collect", writer, "--apply")
    assert code == 0 and "review_refs_replaced" not in codes(report), report
    kept = next(f for f in report["findings"] if f["code"] == "review_refs_kept")
    assert kept["data"]["kept"] == [prefix + "topic/sub"]
    assert sorted(collected(repo, writer)) == ["third", "topic/sub"]

    # `writer refs` lists all three; --prune plans, then drops the moved-aside and merged.
    run_git(repo, "merge", "-q", "--ff-only", prefix + "third")
    code, listed = wp("writer", "refs", writer)
    flags = {r["ref"]: (r["movedAside"], r["merged"]) for r in listed["data"]["refs"]}
    short = aside.removeprefix("refs/remotes/")
    assert flags == {
        f"writer-{writer}/third": (False, True),
        f"writer-{writer}/topic/sub": (False, False),
        short: (True, False),
    }, flags
    code, plan = wp("writer", "refs", writer, "--prune")
    assert code == 0 and codes(plan) == ["review_refs_listed", "review_refs_pruned"], plan
    assert git_out(repo, "rev-parse", aside) == first["topic"]
    assert "1 would be left" in plan["findings"][1]["message"], plan
    code, pruned = wp("writer", "refs", writer, "--prune", "--apply", check=True)
    assert codes(pruned) == ["review_refs_pruned", "review_refs_listed"], pruned
    # What is left, read after the deletion, and what was dropped, each with its flags.
    assert [r["ref"] for r in pruned["data"]["refs"]] == [f"writer-{writer}/topic/sub"]
    assert pruned["findings"][1]["message"] == f"1 review ref(s) left: writer-{writer}/topic/sub"
    dropped = {r["ref"]: (r["movedAside"], r["merged"]) for r in pruned["data"]["dropped"]}
    assert dropped == {f"writer-{writer}/third": (False, True), short: (True, False)}
    assert sorted(collected(repo, writer)) == ["topic/sub"]
    assert run_git(repo, "rev-parse", "-q", "--verify", aside, check=False).returncode != 0


# A commit message of 200,000 characters on one line, and a commit of 2,100 files.
HUGE = """
head -c 200000 /dev/zero | tr '\\0' s | git commit -q --allow-empty -F -
mkdir many && for i in $(seq 2100); do : > many/f$i; done
git add many && git commit -q -m many
"""


def test_log_and_diff_answers_are_bounded_whatever_the_clone_holds(repo: Path, alias: str) -> None:
    writer = ready_writer(alias)
    run_agent(writer, HUGE)
    code, report = wp("writer", "log", writer)
    assert code == 0, report
    subjects = [c["subject"] for c in report["data"]["commits"]]
    assert subjects[0] == "many" and subjects[1] == "s" * 4096, subjects[:1]
    code, report = wp("writer", "diff", writer, "--stat")
    assert code == 0, report
    assert len(report["data"]["files"]) == 2000 and report["data"]["filesTotal"] == 2100
    assert "2100 file(s) changed" in report["findings"][0]["message"], report["findings"]
    stat = _text("writer", "diff", writer, "--stat")
    assert "... and 100 more file(s), not listed" in stat, stat[-300:]
