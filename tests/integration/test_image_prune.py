"""`image prune` and `uninstall` remove only images writerpool built, by the IDs recorded at
build and derive: an operator's own image built FROM the writer image (which inherits
every writerpool label) is never planned and survives `image prune --apply`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, make_checkout, podman, wp, write_config
from tests.support.wheels import find_links_env, make_wheel, requirements_for
from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths
from writerpool.state.images import load_record

pytestmark = [pytest.mark.podman, pytest.mark.image]


def _operator_images(pinned: str, tmp_path: Path) -> list[str]:
    """An image the operator built FROM the writer image, and one they committed."""
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "Containerfile").write_text(f"FROM {pinned}\nLABEL mine=yes\n")
    built = podman("build", "-q", "--pull=never", "--network=none", str(tmp_path / "own"))
    podman("run", "--name", "wp-prune-src", "--pull=never", "--network=none", pinned, "true")
    try:
        committed = podman("commit", "-q", "wp-prune-src")
    finally:
        podman("rm", "-f", "wp-prune-src")
    ids = [i.strip().splitlines()[-1].removeprefix("sha256:") for i in (built, committed)]
    for image_id in ids:
        labels = json.loads(podman("image", "inspect", "--format", "{{json .Labels}}", image_id))
        assert "io.writerpool.inputs" in labels, "it carries writerpool's labels"
    return ids


def _derive(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    wheels = make_wheel(tmp_path / f"wheels-{name}").parent
    for key, value in find_links_env(wheels).items():
        monkeypatch.setenv(key, value)
    req = requirements_for(tmp_path / f"req-{name}.txt")
    code, report = wp("image", "derive", name, "--requirements", str(req))
    assert code == 0, report
    return str(report["data"]["imageId"])


def _ids(report: dict[str, object]) -> str:
    return json.dumps(report)


def test_prune_and_uninstall_touch_only_recorded_images(
    tmp_path: Path, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    write_config(make_checkout(tmp_path / "repo"))
    own = _operator_images(pinned, tmp_path)
    unused = _derive("prunedeps", tmp_path, monkeypatch)
    used = _derive("modedeps", tmp_path, monkeypatch)
    paths = Paths.from_env()
    settings = ContainerSettings(profiles=("code",), image=used, base="main")
    store_entry(paths, "demo", ModeEntry(mode="container", container=settings))
    try:
        code, plan = wp("image", "prune")
        ids = [i["id"] for i in plan["data"]["prunable"]]
        assert code == 0 and ids == [unused], plan
        assert "image_prune_planned" in codes(plan)

        code, uninstall = wp("uninstall")
        assert code == 0, uninstall
        planned = [f["message"] for f in uninstall["findings"] if "image" in f["message"]]
        assert any(unused[:12] in m for m in planned) and any(used[:12] in m for m in planned)
        assert not any(i[:12] in _ids(uninstall) for i in own), "never the operator's"

        code, done = wp("image", "prune", "--apply")
        assert code == 0 and codes(done) == ["image_removed"], done
        present = podman("images", "-a", "-q", "--no-trunc")
        assert unused not in present
        assert all(i in present for i in (*own, used, pinned))
        assert [i.id for i in load_record(paths).images] == [used]
    finally:
        podman("rmi", "-f", "--ignore", *own, unused, used)


def test_without_a_record_the_images_with_writerpools_tags_are_adopted(image_pin: Path) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    paths = Paths.from_env()
    code, plan = wp("image", "prune")
    assert code == 0, plan
    record = load_record(paths).by_id()
    rootfs = record[pinned].base
    assert record[pinned].kind == "writer" and rootfs is not None
    assert record[rootfs].kind == "rootfs"
    planned = {i["id"] for i in plan["data"]["prunable"]}
    assert pinned not in planned and rootfs not in planned, "the pin and its base stay"
    assert all(record[i].kind in ("writer", "rootfs") for i in planned)
