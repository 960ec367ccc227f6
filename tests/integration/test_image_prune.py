"""`image prune` plans by default and removes only writer images nothing uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, podman, wp

pytestmark = [pytest.mark.podman, pytest.mark.image]


def test_prune_plans_then_removes_an_unused_writer_image_and_keeps_the_pin(
    image_pin: Path,
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    # A derived image carries writerpool's labels, as an old build would.
    podman("run", "--name", "wp-prune-src", "--pull=never", pinned, "true")
    try:
        old = podman("commit", "-q", "wp-prune-src").strip().removeprefix("sha256:")
    finally:
        podman("rm", "-f", "wp-prune-src")
    try:
        code, plan = wp("image", "prune")
        ids = [i["id"] for i in plan["data"]["prunable"]]
        assert code == 0 and old in ids and pinned not in ids, plan
        assert "image_prune_planned" in codes(plan)
        assert old in podman("images", "-q", "--no-trunc"), "a plan removes nothing"
        code, done = wp("image", "prune", "--apply")
        assert code == 0 and "image_removed" in codes(done), done
        assert old not in podman("images", "-q", "--no-trunc")
        assert pinned in podman("images", "-q", "--no-trunc")
    finally:
        podman("rmi", "-f", "--ignore", old)
