"""The fence: with the writer's lease held, every container labelled with the writer is
removed (an orphan of a killed server) and no other writer's; without the lease it
refuses. The writer's host is kept in memory (tests/support/memhost.py); the fence on
real Podman, after a killed server and a leftover session container, is in
tests/e2e/test_container_pool.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.memhost import MemoryHost
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.fence import fence
from writerpool.pool.writer.lease import Lease, leased
from writerpool.runtime.spec import LABEL_WRITER, ContainerSpec


def _container(host: MemoryHost, writer: str) -> None:
    host.plant(ContainerSpec(image_id="b" * 64, name=f"writerpool-{writer}",
                             labels={LABEL_WRITER: writer}))  # fmt: skip


def test_fence_removes_the_writers_orphan_containers_only(tmp_path: Path) -> None:
    host = MemoryHost("local")
    _container(host, "demo-w1")
    _container(host, "demo-w1")
    _container(host, "demo-w2")
    with leased(tmp_path / "demo-w1", 1.0) as lease:
        assert fence(host, "demo-w1", lease) == 2
        assert host.containers(LABEL_WRITER, "demo-w1") == []
        assert fence(host, "demo-w1", lease) == 0  # nothing left: nothing to remove
    assert [c.name for c in host.containers(LABEL_WRITER, "demo-w2")] == ["writerpool-demo-w2"]


def test_fence_without_the_lease_refuses_and_removes_nothing(tmp_path: Path) -> None:
    host = MemoryHost("local")
    _container(host, "demo-w1")
    with pytest.raises(WriterpoolError) as refused:
        fence(host, "demo-w1", Lease(tmp_path / "demo-w1"))
    assert refused.value.code == "writer_operation_failed"
    assert len(host.containers(LABEL_WRITER, "demo-w1")) == 1
