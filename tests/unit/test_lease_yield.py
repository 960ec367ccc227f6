"""A warm writer's lease: its holder says so, an operator command asks it to yield and
gets the writer, a session never asks, and a request is withdrawn whatever happens."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from writerpool.errors import WriterpoolError
from writerpool.pool.writer.lease import (
    Lease,
    leased,
    leased_all,
    read_holder,
    yield_asked,
)


def _yield_when_asked(lease: Lease, stop: threading.Event) -> threading.Thread:
    """What the pool service does for a warm writer: release it once asked."""

    def watch() -> None:
        while not stop.wait(0.01):
            if yield_asked(lease.path.parent):
                lease.release()
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_an_operator_command_gets_a_warm_writer_with_no_wait_configured(tmp_path: Path) -> None:
    writer = tmp_path / "w1"
    warm = Lease(writer)
    warm.acquire(wait=0)
    warm.mark_warm()
    holder = read_holder(writer)
    assert holder is not None and holder.warm
    stop = threading.Event()
    watcher = _yield_when_asked(warm, stop)
    try:
        with leased(writer, wait=0) as lease:  # lease_wait_seconds = 0
            assert lease.held
            assert not yield_asked(writer)  # the request is withdrawn once served
            holder = read_holder(writer)
            assert holder is not None and not holder.warm
    finally:
        stop.set()
        watcher.join()


def test_a_batch_asks_only_warm_holders_and_withdraws_what_it_did_not_get(
    tmp_path: Path,
) -> None:
    def dir_of(name: str) -> Path:
        return tmp_path / name

    warm, busy = Lease(dir_of("w1")), Lease(dir_of("w2"))
    warm.acquire(wait=0)
    warm.mark_warm()
    busy.acquire(wait=0)  # a session: not warm, never asked
    stop = threading.Event()
    watcher = _yield_when_asked(warm, stop)
    try:
        # The busy session's writer is waited for as long as a warm holder is given to
        # yield (injected: the product's 10 s would only make the test slower).
        with leased_all(dir_of, ["w1", "w2"], wait=0, yield_wait=1.0) as batch:
            assert batch.take("w1").held
            assert batch.busy() == ["w2"]
            assert not yield_asked(dir_of("w1")) and not yield_asked(dir_of("w2"))
    finally:
        stop.set()
        watcher.join()
        busy.release()


def test_a_session_never_asks_and_a_request_nobody_serves_is_withdrawn(tmp_path: Path) -> None:
    writer = tmp_path / "w1"
    warm = Lease(writer)
    warm.acquire(wait=0)
    warm.mark_warm()
    try:
        with pytest.raises(WriterpoolError) as refused:
            Lease(writer).acquire(wait=0)  # how a session start tries a writer
        assert refused.value.code == "writer_busy"
        assert not yield_asked(writer)
        warm.mark_warm(False)  # claimed by a session: no longer yields
        with pytest.raises(WriterpoolError) as refused, leased(writer, wait=0.1):
            pass
        assert refused.value.code == "writer_busy"
        assert not yield_asked(writer)
    finally:
        warm.release()
