"""A leased writer's slot ends once. A remote session's connection watch releases it from
its own thread while the session's stop may be closing it: whichever comes first ends
it, the other returns at once, and neither touches the lease or the container of a
session that took the writer afterwards."""

from __future__ import annotations

import secrets
import threading
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.pool.claims.lease_ready import WriterSlot
from writerpool.pool.writer.lease import Lease
from writerpool.runtime.host import ContainerRef, writer_at
from writerpool.runtime.image import image_setting_id
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.spec import LABEL_WRITER, ContainerSpec

pytestmark = [pytest.mark.podman, pytest.mark.image]

GUARD_SECONDS = 120.0  # only against a hang: nothing here waits on time


class HeldPodman(LocalPodman):
    """This account's Podman, where the first listing of a writer's containers waits
    until the test lets it go: the first end of the slot is held inside its work."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = threading.Event()
        self.go = threading.Event()
        self._first = threading.Lock()

    def containers(self, label: str, value: str) -> list[ContainerRef]:
        if self._first.acquire(blocking=False):  # never released: only the first waits
            self.inside.set()
            if not self.go.wait(GUARD_SECONDS):
                raise AssertionError("the test never let the listing go")
        return super().containers(label, value)


def _session_container(spec: ContainerSpec, host: LocalPodman) -> None:
    """A running container with the writer's label, as a session's would be."""
    argv = spec.run_argv(["sleep", "600"])
    host.cli([argv[0], "-d", *argv[1:]])


def _running(host: LocalPodman, name: str) -> list[str]:
    return [c.name for c in host.containers(LABEL_WRITER, name)]


def _taken(writer_dir: Path) -> bool:
    """Whether some holder has the lease (asked by taking it, given back at once)."""
    probe = Lease(writer_dir)
    if not probe.try_acquire(judging=True):
        return True
    probe.release()
    return False


def test_a_slot_ended_from_two_threads_is_ended_once_and_never_frees_a_later_lease(
    image_pin: Path,
) -> None:
    paths = Paths.from_env()
    name = f"end{secrets.token_hex(3)}-w1"
    writer_dir = paths.writer_dir(name)
    plain, held = LocalPodman(), HeldPodman()
    spec = ContainerSpec(image_id=image_setting_id(paths, "default"),
                         name=f"writerpool-{name}", labels={LABEL_WRITER: name},
                         workdir="/tmp")  # fmt: skip
    first = Lease(writer_dir)
    first.acquire(0)
    slot = WriterSlot(name=name, base_ref="main", base_commit="0" * 40,
                      writer=writer_at(paths, name), network="none", allow=None, spec=spec,
                      host=held, lease=first)  # fmt: skip
    later = Lease(writer_dir)
    try:
        _session_container(spec, plain)
        # The session's stop closes the slot; it is held inside, listing containers.
        stop = threading.Thread(target=slot.close, name="stop")
        stop.start()
        assert held.inside.wait(GUARD_SECONDS)
        # The connection watch releases it meanwhile: it returns at once, and the
        # container and the lease are still the stop's to end.
        slot.release()
        assert _running(plain, name) == [f"writerpool-{name}"]
        assert _taken(writer_dir)
        held.go.set()
        stop.join(GUARD_SECONDS)
        assert not stop.is_alive()
        assert _running(plain, name) == [] and not _taken(writer_dir)

        # Another session takes the writer and starts its container; the slot's late
        # ends (a watch that fires now, a second stop) leave both alone.
        assert later.try_acquire()
        _session_container(spec, plain)
        slot.release()
        assert slot.close() == "writer_not_leased"
        assert _running(plain, name) == [f"writerpool-{name}"]
        assert later.held and _taken(writer_dir)
    finally:
        held.go.set()
        for container in plain.containers(LABEL_WRITER, name):
            plain.remove(container.id)
        later.release()
        first.release()
