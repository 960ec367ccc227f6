"""Leases of many writers taken with one wait, and asking about a lease without taking it."""

from __future__ import annotations

from pathlib import Path

import pytest

from writerpool.errors import WriterpoolError
from writerpool.pool.writer.lease import Lease, LeaseBatch, lease_taken, leased_all


def test_a_batch_holds_the_free_leases_and_refuses_each_busy_one_by_its_holder(
    tmp_path: Path,
) -> None:
    def dir_of(name: str) -> Path:
        return tmp_path / "writers" / name

    other = Lease(dir_of("w2"))  # another open file: flock excludes it like a process
    other.acquire(wait=0)
    try:
        with leased_all(dir_of, ["w1", "w2", "w3"], wait=0) as batch:
            assert batch.busy() == ["w2"]
            assert batch.take("w1").held and batch.take("w3").held
            with pytest.raises(WriterpoolError) as busy:
                batch.take("w2")
            assert busy.value.code == "writer_busy" and "pid" in busy.value.message
            assert lease_taken(dir_of("w1")) and lease_taken(dir_of("w2"))
            late = batch.take("w4")  # not named up front: taken now, released with the rest
            assert late.held
        assert not any(lease_taken(dir_of(n)) for n in ("w1", "w3", "w4"))
        assert lease_taken(dir_of("w2"))
    finally:
        other.release()
    assert not lease_taken(dir_of("w2"))


def test_a_batch_takes_a_lease_freed_during_its_wait(tmp_path: Path) -> None:
    held = Lease(tmp_path / "w1")
    held.acquire(wait=0)
    batch = LeaseBatch(lambda name: tmp_path / name, ["w1"])
    batch.acquire(wait=0)
    assert batch.busy() == ["w1"]
    held.release()
    batch.acquire(wait=0)
    assert batch.busy() == []
    batch.release_all()
    assert not lease_taken(tmp_path / "w1")


def test_an_unopenable_lease_is_refused_with_its_own_code(tmp_path: Path) -> None:
    (tmp_path / "w1").mkdir()
    (tmp_path / "w1" / "lease").symlink_to(tmp_path / "elsewhere")
    with (
        leased_all(lambda name: tmp_path / name, ["w1"], wait=0) as batch,
        pytest.raises(WriterpoolError) as refused,
    ):
        batch.take("w1")
    assert refused.value.code == "writer_lease_unavailable"
