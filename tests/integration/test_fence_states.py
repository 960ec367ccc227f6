"""Two writerpool states of one Podman account with a writer of the same name (two
configurations with one alias): the fence of one never removes the other's container,
on real Podman (the label as Podman lists it); and the leftover of a killed Podman client
that holds a writer's name. The rules with every case are in tests/unit/test_fence.py."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.writer import fence as fence_module
from writerpool.pool.writer.fence import fence
from writerpool.pool.writer.lease import leased
from writerpool.runtime.host import writer_at
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.podman import podman_env
from writerpool.runtime.spec import LABEL_CONTROLLER, LABEL_WRITER

pytestmark = [pytest.mark.podman, pytest.mark.image]


def test_the_fence_leaves_another_states_container_of_the_same_writer_name(
    tmp_path: Path, image_pin: Path
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    name = f"tfence{secrets.token_hex(3)}-w1"
    ours, theirs = (writer_at(Paths(tmp_path / s / "config.toml", tmp_path / s / "state",
                                    tmp_path / s / "cache"), name) for s in ("a", "b"))  # fmt: skip
    podman = LocalPodman()
    made = podman.cli(["create", "--label", f"{LABEL_WRITER}={name}",
                       "--label", f"{LABEL_CONTROLLER}={theirs.controller}", pinned, "true"],
                      timeout=120)  # fmt: skip
    container = made.out.strip()
    try:
        with leased(tmp_path / "lease", 1.0) as lease:
            with pytest.raises(WriterpoolError) as taken:
                fence(podman, ours, lease)
            assert taken.value.code == "writer_name_taken"
            assert [c.id for c in podman.containers(LABEL_WRITER, name)] == [container]
            assert fence(podman, theirs, lease) == 1  # its own state's fence removes it
        assert podman.containers(LABEL_WRITER, name) == []
    finally:
        podman.cli(["rm", "--force", "--", container], timeout=120, check=False)


def test_the_fence_removes_a_leftover_that_holds_the_writers_name(
    tmp_path: Path, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container only the image store holds, as a Podman client killed mid-create
    leaves one (buildah makes it here, on the same store): no `podman run` of that name
    works until it is gone. The fence takes the writer's, not another writer's."""
    pinned = json.loads(image_pin.read_text())["imageId"]
    name = f"tleft{secrets.token_hex(3)}-w1"
    writer = writer_at(Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache"),
                       name)  # fmt: skip
    podman = LocalPodman()
    ours, other = f"writerpool-{name}", f"writerpool-{name}0"
    for left in (ours, other):
        subprocess.run(["buildah", "from", "--name", left, "--pull=never", pinned],
                       env=podman_env(), check=True, capture_output=True, timeout=120)  # fmt: skip
    try:
        blocked = podman.cli(["create", "--name", ours, pinned, "true"], check=False)
        assert blocked.returncode != 0 and b"already in use" in blocked.stderr
        # Its age is read on the host's clock (the answer's Date, its Created): moments.
        ages = [c.age for c in podman.leftovers() if c.name in (ours, other)]
        assert len(ages) == 2 and all(a is not None and -2 <= a < 600 for a in ages), ages
        monkeypatch.setattr(fence_module, "LEFTOVER_GRACE", 0.5)  # young: waited, not 15 s
        with leased(tmp_path / "lease", 1.0) as lease:
            assert fence(podman, writer, lease) == 1
            assert fence(podman, writer, lease) == 0
        assert [c.name for c in podman.leftovers() if c.name in (ours, other)] == [other]
        podman.cli(["create", "--name", ours, pinned, "true"], timeout=120)  # the name is free
    finally:
        for left in (ours, other):
            podman.cli(["rm", "--force", "--", left], timeout=120, check=False)
