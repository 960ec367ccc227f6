"""The fence: with the writer's lease held, every container labelled with the writer is
removed (an orphan of a killed server) and no other writer's, nor the same writer name's
of another writerpool state of the account; without the lease it refuses. The writer's
host is kept in memory (tests/support/memhost.py); the fence on real Podman, after a
killed server and a leftover session container, is in tests/e2e/test_container_pool.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.memhost import MemoryHost
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.writer import fence as fence_module
from writerpool.pool.writer.fence import fence
from writerpool.pool.writer.lease import Lease, leased
from writerpool.runtime.host import ContainerRef, Writer, writer_at
from writerpool.runtime.podman import PodmanApiUnavailable
from writerpool.runtime.spec import LABEL_CONTROLLER, LABEL_WRITER, ContainerSpec


def _writer(tmp_path: Path, name: str = "demo-w1") -> Writer:
    return writer_at(Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache"), name)


def _container(host: MemoryHost, writer: str, controller: str | None = None) -> None:
    labels = {LABEL_WRITER: writer}
    if controller is not None:
        labels[LABEL_CONTROLLER] = controller
    host.plant(ContainerSpec(image_id="b" * 64, name=f"writerpool-{writer}", labels=labels))


def test_fence_removes_the_writers_orphan_containers_only(tmp_path: Path) -> None:
    host = MemoryHost("local")
    writer = _writer(tmp_path)
    _container(host, "demo-w1", writer.controller)
    _container(host, "demo-w1")  # an older writerpool's: no controller label
    _container(host, "demo-w2", writer.controller)
    with leased(tmp_path / "demo-w1", 1.0) as lease:
        assert fence(host, writer, lease) == 2
        assert host.containers(LABEL_WRITER, "demo-w1") == []
        assert fence(host, writer, lease) == 0  # nothing left: nothing to remove
    assert [c.name for c in host.containers(LABEL_WRITER, "demo-w2")] == ["writerpool-demo-w2"]


def test_a_writer_of_the_same_name_of_another_state_is_refused_and_left_running(
    tmp_path: Path,
) -> None:
    host = MemoryHost("local")
    ours = _writer(tmp_path)
    theirs = _writer(tmp_path / "other")  # another state directory: another id
    assert theirs.controller != ours.controller
    _container(host, "demo-w1", theirs.controller)
    _container(host, "demo-w1", ours.controller)  # a session of ours a killed server left
    with leased(tmp_path / "demo-w1", 1.0) as lease, pytest.raises(WriterpoolError) as taken:
        fence(host, ours, lease)
    assert taken.value.code == "writer_name_taken"
    assert theirs.controller in taken.value.message
    # Ours is removed all the same: no container of this state outlives its lease.
    assert [c.controller for c in host.containers(LABEL_WRITER, "demo-w1")] == [theirs.controller]
    # Its own state fences it as any orphan.
    with leased(tmp_path / "other-w1", 1.0) as lease:
        assert fence(host, dataclasses.replace(ours, controller=theirs.controller), lease) == 1


def test_fence_without_the_lease_refuses_and_removes_nothing(tmp_path: Path) -> None:
    host = MemoryHost("local")
    _container(host, "demo-w1")
    with pytest.raises(WriterpoolError) as refused:
        fence(host, _writer(tmp_path), Lease(tmp_path / "demo-w1"))
    assert refused.value.code == "writer_operation_failed"
    assert len(host.containers(LABEL_WRITER, "demo-w1")) == 1


def _left(host: MemoryHost, name: str, age: float | None = 3600.0) -> None:
    host.plant(ContainerSpec(image_id="b" * 64, name=name), left=True, age=age)


class Listed(MemoryHost):
    """Counts its leftover lists; `registers`: the young leftover it holds is another
    state's container in the making, which Podman records (labelled) after the first list."""

    def __init__(self, registers: Writer | None = None) -> None:
        super().__init__("local")
        self.lists = 0
        self.registers = registers

    def leftovers(self) -> list[ContainerRef]:
        found = super().leftovers()
        self.lists += 1
        if self.registers is not None and self.lists == 1:
            for ref in found:
                self.planted.pop(ref.id)
                _container(self, "demo-w1", self.registers.controller)
        return found


def test_fence_removes_the_leftovers_that_hold_the_writers_names_only(tmp_path: Path) -> None:
    host = MemoryHost("local")
    writer = _writer(tmp_path)
    for name in ("writerpool-demo-w1", "writerpool-demo-w1-provision"):
        _left(host, name)
    others = [
        "writerpool-demo-w10",  # another writer of the alias
        "writerpool-demo-w1-x-w1",  # a writer of the alias demo-w1-x
        "writerpool-demo-w1-view-0123456789ab",  # a view, maybe in the making beside it
        "writerpool-ro-s1",
        "buildah-working-container",
    ]
    for name in others:
        _left(host, name)
    with leased(tmp_path / "demo-w1", 1.0) as lease:
        assert fence(host, writer, lease) == 2
    assert sorted(c.name for c in host.leftovers()) == sorted(others)


def test_a_fence_whose_leftovers_cannot_be_listed_still_removes_the_writers_containers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Racing(MemoryHost):
        def leftovers(self) -> list[ContainerRef]:
            raise PodmanApiUnavailable("Podman's API service failed to list containers")

    host = Racing("local")
    writer = _writer(tmp_path)
    _container(host, "demo-w1", writer.controller)
    with leased(tmp_path / "demo-w1", 1.0) as lease:
        assert fence(host, writer, lease) == 1  # a leftover runs nothing: the fence holds
    assert host.containers(LABEL_WRITER, "demo-w1") == []
    assert "leftovers were not listed" in caplog.text


def test_an_old_leftover_is_removed_at_once_a_young_one_once_it_stays_a_leftover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fence_module, "LEFTOVER_GRACE", 0.2)  # injected, not waited out
    writer = _writer(tmp_path)
    old = Listed()
    _left(old, "writerpool-demo-w1", age=60.0)
    with leased(tmp_path / "demo-w1", 1.0) as lease:
        assert fence(old, writer, lease) == 1
    assert old.leftovers() == [] and old.lists == 3  # the fence's, its confirmation, ours
    for age in (0.0, None):  # made a moment ago, or of an age the host did not give
        young = Listed()
        _left(young, "writerpool-demo-w1", age=age)
        with leased(tmp_path / "demo-w1", 1.0) as lease:
            assert fence(young, writer, lease) == 1
        assert young.leftovers() == [] and young.lists == 4  # listed again after the grace


def test_a_young_leftover_that_another_state_records_meanwhile_is_left_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fence_module, "LEFTOVER_GRACE", 0.2)
    ours = _writer(tmp_path)
    theirs = _writer(tmp_path / "other")
    host = Listed(registers=theirs)
    _left(host, "writerpool-demo-w1", age=0.0)  # their session's container, being made
    with leased(tmp_path / "demo-w1", 1.0) as lease:
        assert fence(host, ours, lease) == 0
    assert [c.controller for c in host.containers(LABEL_WRITER, "demo-w1")] == [theirs.controller]
