"""Lock files a killed collection leaves on a writer's review refs (pool/collect/ref_locks.py),
on a real git checkout: removed from the writer's own namespaces only, and only once stale."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.repos import git_out, make_repo, run_git
from writerpool.pool.collect.ref_locks import clear_stale_locks
from writerpool.report import Report

WRITER = "app-w1"
TARGET = f"writer/app/{WRITER}"


def _lock(repo: Path, ref: str, age: float) -> Path:
    path = repo / ".git" / f"{ref}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    checkout = make_repo(tmp_path / "checkout", commits=2, files=2)
    head = git_out(checkout, "rev-parse", "HEAD")
    for ref in (f"writer-{WRITER}/topic", f"writer-{WRITER}@20260101T000000Z/old"):
        run_git(checkout, "update-ref", f"refs/remotes/{ref}", head)
    return checkout


def test_a_killed_move_aside_leaves_locks_that_are_removed_and_named(repo: Path) -> None:
    head = git_out(repo, "rev-parse", "HEAD")
    mine = [
        _lock(repo, f"refs/remotes/writer-{WRITER}/topic", 60),
        _lock(repo, f"refs/remotes/writer-{WRITER}@20260101T000000Z/old", 60),
    ]
    move = (
        f"create refs/remotes/writer-{WRITER}@20260102T000000Z/topic {head}\n"
        f"delete refs/remotes/writer-{WRITER}/topic {head}\n"
    )
    refused = run_git(repo, "update-ref", "--stdin", input=move.encode(), check=False)
    assert refused.returncode != 0 and b"File exists" in refused.stderr
    # Another writer whose name starts alike, a branch, packed-refs: not this writer's.
    others = [
        _lock(repo, "refs/remotes/writer-app-w10/x", 60),
        _lock(repo, "refs/heads/operator-branch", 60),
        _lock(repo, "packed-refs", 60),
    ]

    report = Report("writer collect")
    clear_stale_locks(repo, WRITER, report, TARGET, settle=1.0)

    assert not any(lock.exists() for lock in mine)
    assert all(lock.exists() for lock in others)
    [finding] = report.findings
    assert finding.code == "review_ref_locks_removed" and finding.status == "warning"
    assert f"refs/remotes/writer-{WRITER}/topic.lock" in finding.message
    assert "operator-branch" not in finding.message and "w10" not in finding.message
    others[-1].unlink()
    run_git(repo, "update-ref", "--stdin", input=move.encode())
    assert (
        git_out(repo, "rev-parse", f"refs/remotes/writer-{WRITER}@20260102T000000Z/topic") == head
    )


def test_a_young_lock_is_given_the_settle_time_and_a_clean_checkout_is_left_alone(
    repo: Path,
) -> None:
    report = Report("writer collect")
    clear_stale_locks(repo, WRITER, report, TARGET, settle=0.2)
    assert report.findings == []
    young = _lock(repo, f"refs/remotes/writer-{WRITER}/topic", 0)
    clear_stale_locks(repo, WRITER, report, TARGET, settle=0.2)
    assert not young.exists() and [f.code for f in report.findings] == ["review_ref_locks_removed"]
