"""Which writer a session start leases, on a host kept in memory (tests/support/memhost.py):
a writer whose recorded verdict is clean is taken first, without an inspection; one whose
verdict refuses it is not tried and is named with its recorded reason; one that was never
judged is inspected (which the memory host cannot do: it is refused for that); a busy one
is writer_busy; and with none free the start is writer_unavailable naming each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.memhost import MemoryHost
from tests.support.memwriters import IMAGE, judged, memory_pool
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.claims.admission import LEASABLE
from writerpool.pool.claims.lease_ready import WriterSlot, lease_ready_writer
from writerpool.pool.writer.verdicts import lease_count


@pytest.fixture
def host(tmp_path: Path) -> MemoryHost:
    return memory_pool(tmp_path, writers=3)[1]


def _start(paths: Paths, host: MemoryHost) -> WriterSlot:
    return lease_ready_writer(paths, load_config(paths), "demo", None, host=host)


def test_a_clean_verdict_goes_first_a_refusing_one_is_not_tried_and_none_free_names_each(
    host: MemoryHost,
) -> None:
    paths = Paths.from_env()
    judged(paths, "demo-w1", "writer_holds_work", "holds uncollected work")
    judged(paths, "demo-w3", LEASABLE, "free")
    # demo-w2 was never judged.
    slot = _start(paths, host)
    try:
        assert slot.name == "demo-w3"  # clean first: no inspection, nothing ran
        assert host.ran == []
        assert lease_count(paths.writer_dir("demo-w3")) == 1  # the session changes it
        with pytest.raises(WriterpoolError) as refused:
            _start(paths, host)
    finally:
        slot.release()
    assert refused.value.code == "writer_unavailable"
    message = refused.value.message
    assert "demo-w1 holds uncollected work (writer_holds_work)" in message, message
    assert "demo-w3 writer_busy" in message, message
    # demo-w2 was tried: inspected in a container, which a memory host never runs.
    assert "demo-w2 " in message and host.ran, message
    assert str(paths.state_dir) not in message


def test_clean_writers_go_in_index_order_and_readiness_is_judged_at_every_start(
    host: MemoryHost,
) -> None:
    paths = Paths.from_env()
    for name in ("demo-w1", "demo-w2", "demo-w3"):
        judged(paths, name, LEASABLE, "free")
    # The same host with its volumes elsewhere would run another spec (the guards' mounts
    # name paths inside them): every writer's acceptance is stale there, whatever verdict
    # its clone had.
    moved = MemoryHost("local", images=(IMAGE,), volume_dir="/data/volumes")
    with pytest.raises(WriterpoolError) as refused:
        _start(paths, moved)
    assert refused.value.code == "writer_unavailable"
    message = refused.value.message
    assert all(f"demo-w{i} " in message for i in (1, 2, 3)), message
    assert message.count("writer_acceptance_stale") == 3, message
    first = _start(paths, host)
    second = _start(paths, host)
    try:
        assert (first.name, second.name) == ("demo-w1", "demo-w2")
        assert moved.ran == host.ran == []  # nothing inspected: the verdicts stood in
    finally:
        first.release()
        second.release()
