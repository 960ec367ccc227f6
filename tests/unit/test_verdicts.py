"""The guard's remembered verdicts: current until anything that may change the clone
takes the writer's lease; a start skips a writer known dirty and tries a known clean
one first."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.pool.claims.choose import candidates
from writerpool.pool.writer.lease import Lease
from writerpool.pool.writer.verdicts import Verdict, current, lease_count, mark_changed, remember

DIRTY = Verdict("writer_not_at_baseline", "not at its baseline", ("3 ignored file(s)",))
WORK = Verdict("writer_holds_work", "holds work no complete collection covers", ("x",))
CLEAN = Verdict("writer_leasable", "a session can have it", ())


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    paths = Paths.from_env()
    for index in (1, 2, 3):
        wdir = paths.writer_dir(f"ws-w{index}")
        wdir.mkdir(parents=True)
        (wdir / "state.json").write_text(f'{{"name": "ws-w{index}"}}')
    return paths


def _judge(wdir: Path, verdict: Verdict) -> None:
    lease = Lease(wdir)
    lease.acquire(0, judging=True)
    try:
        remember(wdir, lease_count(wdir), verdict)
    finally:
        lease.release()


def test_a_verdict_is_current_until_a_session_or_command_takes_the_lease(paths: Paths) -> None:
    wdir = paths.writer_dir("ws-w1")
    _judge(wdir, DIRTY)
    assert current(wdir) == DIRTY
    _judge(wdir, DIRTY)  # judging again changes nothing
    assert current(wdir) == DIRTY
    lease = Lease(wdir)
    lease.acquire(0)  # a command: the clone may change
    lease.release()
    assert current(wdir) is None


def test_a_changed_state_file_makes_the_verdict_stale(paths: Paths) -> None:
    wdir = paths.writer_dir("ws-w2")
    _judge(wdir, CLEAN)
    assert current(wdir) == CLEAN
    (wdir / "state.json").write_text('{"name": "ws-w2", "phase": "provisioned"}')
    assert current(wdir) is None


def test_a_start_tries_known_clean_writers_first_and_skips_known_dirty_ones(
    paths: Paths,
) -> None:
    _judge(paths.writer_dir("ws-w1"), DIRTY)
    _judge(paths.writer_dir("ws-w3"), CLEAN)
    refusals: list[str] = []
    assert candidates(paths, "ws", 3, refusals) == ["ws-w3", "ws-w2", "ws-w1"]
    assert refusals == []  # leftovers only: the lease removes them, so it is tried last
    _judge(paths.writer_dir("ws-w1"), WORK)
    assert candidates(paths, "ws", 3, refusals) == ["ws-w3", "ws-w2"]
    assert refusals == ["ws-w1 holds work no complete collection covers (writer_holds_work)"]
    # A forged or unreadable record is no verdict at all.
    (paths.writer_dir("ws-w3") / "verdict.json").write_text("[]")
    (paths.writer_dir("ws-w1") / "lease-count").write_text("many")
    assert candidates(paths, "ws", 3, []) == ["ws-w1", "ws-w2", "ws-w3"]


def test_a_writer_not_inspected_at_its_session_end_is_tried_last(paths: Paths) -> None:
    wdir = paths.writer_dir("ws-w1")
    lease = Lease(wdir)
    lease.acquire(0)  # a session, whose clone could not be inspected at its close
    mark_changed(wdir)
    lease.release()
    assert candidates(paths, "ws", 3, []) == ["ws-w2", "ws-w3", "ws-w1"]
    lease.acquire(0)  # the operator's reset: the mark is no longer current
    lease.release()
    assert candidates(paths, "ws", 3, []) == ["ws-w1", "ws-w2", "ws-w3"]


def test_a_current_verdict_names_its_record_by_digest_and_a_new_record_changes_it(
    paths: Paths,
) -> None:
    wdir = paths.writer_dir("ws-w1")
    _judge(wdir, CLEAN)
    seen = current(wdir)
    assert seen is not None
    record = (wdir / "verdict.json").read_bytes()
    assert seen.digest == "sha256:" + hashlib.sha256(record).hexdigest()
    # The same verdict recorded under a later lease count is another record.
    lease = Lease(wdir)
    lease.acquire(0)
    try:
        remember(wdir, lease_count(wdir), CLEAN)
    finally:
        lease.release()
    again = current(wdir)
    assert again == CLEAN and again is not None and again.digest != seen.digest


def test_a_lease_is_proven_only_while_its_lock_is_on_the_file_as_it_is_now(
    paths: Paths,
) -> None:
    wdir = paths.writer_dir("ws-w2")
    lease = Lease(wdir)
    assert not lease.proven()  # not held
    lease.acquire(0)
    try:
        assert lease.proven()
        # The file replaced under the holder: another process could lock the new one.
        (wdir / "lease").unlink()
        assert not lease.proven()
        other = Lease(wdir)
        assert other.try_acquire()
        other.release()
    finally:
        lease.release()
    assert not lease.proven()
