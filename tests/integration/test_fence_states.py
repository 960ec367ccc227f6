"""Two writerpool states of one Podman account with a writer of the same name (two
configurations with one alias): the fence of one never removes the other's container,
on real Podman (the label as Podman lists it). The rules with every case are in
tests/unit/test_fence.py."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.fence import fence
from writerpool.pool.writer.lease import leased
from writerpool.runtime.host import writer_at
from writerpool.runtime.local import LocalPodman
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
