"""A command that waits for a busy writer says at once, on stderr, for whom and how long;
one that does not wait (a session start) says nothing. Deadlines are injected."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from writerpool.cli.output import notices_on_stderr
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.lease import Lease, leased, leased_all


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lease]:
    """w1's lease held by another open file (flock excludes it like another process),
    whose holder record names the command that took it."""
    monkeypatch.setattr(sys, "argv", ["writerpool", "writer", "collect", "w1", "--apply"])
    other = Lease(tmp_path / "writers" / "w1")
    other.acquire(wait=0)
    monkeypatch.setattr(sys, "argv", ["writerpool", "writer", "reset", "w1"])
    yield other
    other.release()


def test_a_wait_for_a_busy_writer_names_the_holder_and_the_deadline_at_once(
    held: Lease, capsys: pytest.CaptureFixture[str]
) -> None:
    notices_on_stderr()
    with pytest.raises(WriterpoolError) as busy, leased(held.path.parent, 0.3):
        pass
    assert busy.value.code == "writer_busy"
    err = capsys.readouterr().err
    assert err.startswith(
        f"writerpool: writer w1 is held by pid {os.getpid()}: "
        "writerpool writer collect w1 --apply; waiting up to 0.3 s for it "
        "([pool] lease_wait_seconds), then writer_busy\n"
    ), err
    assert err.count("\n") == 1, "said once, not at every poll"


def test_a_lease_file_without_a_name_is_said_so(
    held: Lease, capsys: pytest.CaptureFixture[str]
) -> None:
    notices_on_stderr()
    os.truncate(held.path, 0)  # a holder that never wrote its name
    with pytest.raises(WriterpoolError), leased(held.path.parent, 0.2):
        pass
    assert "held by another process (the lease file names none)" in capsys.readouterr().err


def test_no_wait_says_nothing(held: Lease, capsys: pytest.CaptureFixture[str]) -> None:
    notices_on_stderr()
    with pytest.raises(WriterpoolError):
        Lease(held.path.parent).acquire(wait=0)  # a session start: refused at once
    with leased(held.path.parent.parent / "w2", 5.0) as free:  # free: taken at once
        assert free.held
    assert capsys.readouterr().err == ""


def test_a_batch_names_every_busy_writer_in_one_line(
    held: Lease, capsys: pytest.CaptureFixture[str]
) -> None:
    notices_on_stderr()
    writers = held.path.parent.parent
    with leased_all(lambda name: writers / name, ["w1", "w2"], wait=0.2) as batch:
        assert batch.busy() == ["w1"]
    err = capsys.readouterr().err
    assert err.startswith(
        f"writerpool: 1 writer(s) held (w1 by pid {os.getpid()}: writerpool writer collect "
        "w1 --apply); waiting up to 0.2 s for them once"
    ), err
    assert err.count("\n") == 1
