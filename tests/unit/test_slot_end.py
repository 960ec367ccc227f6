"""A leased writer's slot ends once. A remote session's connection watch releases it from
its own thread while the session's stop may be closing it: whichever comes first ends
it, the other returns at once, and neither touches the lease or the container of a
session that took the writer afterwards. The writer's host is kept in memory
(tests/support/memhost.py): the containers are the ones the test plants there."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.memhost import MemoryHost
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.claims.lease_ready import WriterSlot
from writerpool.pool.writer.lease import Lease
from writerpool.runtime.host import ContainerRef, writer_at
from writerpool.runtime.spec import LABEL_CONTROLLER, LABEL_WRITER, ContainerSpec

GUARD_SECONDS = 120.0  # only against a hang: nothing here waits on time
NAME = "end-w1"


class HeldHost(MemoryHost):
    """A host where the first listing of a writer's containers waits until the test lets
    it go: the first end of the slot is held inside its work."""

    def __init__(self) -> None:
        super().__init__("local")
        self.inside = threading.Event()
        self.go = threading.Event()
        self._first = threading.Lock()

    def containers(self, label: str, value: str) -> list[ContainerRef]:
        if self._first.acquire(blocking=False):  # never released: only the first waits
            self.inside.set()
            if not self.go.wait(GUARD_SECONDS):
                raise AssertionError("the test never let the listing go")
        return super().containers(label, value)


def _running(host: MemoryHost) -> list[str]:
    return [c.name for c in MemoryHost.containers(host, LABEL_WRITER, NAME)]


def _taken(writer_dir: Path) -> bool:
    """Whether some holder has the lease (asked by taking it, given back at once)."""
    probe = Lease(writer_dir)
    if not probe.try_acquire(judging=True):
        return True
    probe.release()
    return False


def test_a_slot_ended_from_two_threads_is_ended_once_and_never_frees_a_later_lease() -> None:
    paths = Paths.from_env()
    writer_dir = paths.writer_dir(NAME)
    host = HeldHost()
    spec = ContainerSpec(image_id="b" * 64, name=f"writerpool-{NAME}",
                         labels={LABEL_WRITER: NAME}, workdir="/tmp")  # fmt: skip
    first = Lease(writer_dir)
    first.acquire(0)
    slot = WriterSlot(name=NAME, base_ref="main", base_commit="0" * 40,
                      writer=writer_at(paths, NAME), network="none", allow=None, spec=spec,
                      host=host, lease=first)  # fmt: skip
    later = Lease(writer_dir)
    try:
        host.plant(spec)
        # The session's stop closes the slot; it is held inside, listing containers.
        stop = threading.Thread(target=slot.close, name="stop")
        stop.start()
        assert host.inside.wait(GUARD_SECONDS)
        # The connection watch releases it meanwhile: it returns at once, and the
        # container and the lease are still the stop's to end.
        slot.release()
        assert _running(host) == [f"writerpool-{NAME}"]
        assert _taken(writer_dir)
        host.go.set()
        stop.join(GUARD_SECONDS)
        assert not stop.is_alive()
        assert _running(host) == [] and not _taken(writer_dir)

        # Another session takes the writer and starts its container; the slot's late
        # ends (a watch that fires now, a second stop) leave both alone.
        assert later.try_acquire()
        host.plant(spec)
        slot.release()
        assert slot.close() == "writer_not_leased"
        assert _running(host) == [f"writerpool-{NAME}"]
        assert later.held and _taken(writer_dir)
    finally:
        host.go.set()
        later.release()
        first.release()


def test_a_slot_removes_its_own_container_though_another_state_holds_the_writers_name() -> None:
    paths = Paths.from_env()
    ours = writer_at(paths, NAME)
    host = MemoryHost("local")
    labels = {LABEL_WRITER: NAME, LABEL_CONTROLLER: ours.controller}
    spec = ContainerSpec(image_id="b" * 64, name=f"writerpool-{NAME}", workdir="/tmp",
                         labels=labels)  # fmt: skip
    theirs = spec.model_copy(update={"labels": {LABEL_WRITER: NAME, LABEL_CONTROLLER: "f" * 16}})
    lease = Lease(paths.writer_dir(NAME))
    lease.acquire(0)
    slot = WriterSlot(name=NAME, base_ref="main", base_commit="0" * 40, writer=ours,
                      network="none", allow=None, spec=spec, host=host, lease=lease)  # fmt: skip
    host.plant(spec)
    host.plant(theirs)
    with pytest.raises(WriterpoolError) as taken:
        slot.close()
    assert taken.value.code == "writer_name_taken"
    # Its own container is gone and the lease free: nothing of this state outlives them.
    remaining = MemoryHost.containers(host, LABEL_WRITER, NAME)
    assert [c.controller for c in remaining] == ["f" * 16]
    assert not _taken(paths.writer_dir(NAME))
