"""`image prune` and `uninstall` remove only images writerpool built, by the IDs recorded at
build and derive: an operator's own image built FROM the writer image (which inherits
every writerpool label) is never planned and survives `image prune --apply`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, make_checkout, podman, wp, write_config
from tests.support.images import remove_images
from tests.support.wheels import find_links_env, make_wheel, requirements_for
from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths
from writerpool.runtime.image import save_pin
from writerpool.state.images import BuiltImage, load_record, record_built

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
        remove_images(*own, unused, used)


def _cheap_image(pinned: str, tmp_path: Path, name: str, tag: str | None = None) -> str:
    """A config-only image on the writer image (no layer is copied), optionally tagged."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "Containerfile").write_text(f"FROM {pinned}\nLABEL test.image={name}\n")
    extra = ["--tag", tag] if tag else []
    out = podman("build", "-q", "--pull=never", "--network=none", *extra, str(tmp_path / name))
    return out.strip().splitlines()[-1].removeprefix("sha256:")


def _use_install(monkeypatch: pytest.MonkeyPatch, home: Path) -> Paths:
    """Point HOME and the XDG dirs at another install's home (Podman's storage stays the
    account's: every install of an account shares it)."""
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CACHE_HOME", ".cache"), ("XDG_DATA_HOME", ".local/share")):  # fmt: skip
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("WRITERPOOL_CONFIG", str(home / ".config" / "writerpool" / "config.toml"))
    return Paths.from_env()


def test_prune_of_a_second_install_leaves_the_first_installs_images(
    tmp_path: Path, image_pin: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    second = Paths.from_env()  # this test's home: the real image pinned, no images.json
    tag = f"localhost/writerpool-writer:test-{tmp_path.name[-12:].lower()}"
    first_image = _cheap_image(pinned, tmp_path, "first", tag)
    second_own = _cheap_image(pinned, tmp_path, "second")
    try:
        first = _use_install(monkeypatch, tmp_path / "first-home")
        save_pin(first, first_image, "0" * 64)
        record_built(first, [BuiltImage(id=first_image, kind="writer", base=pinned)])
        _use_install(monkeypatch, isolated_env)

        # No record: nothing is chosen by its writerpool-* tag, and prune says why.
        code, done = wp("image", "prune", "--apply")
        assert code == 0 and codes(done) == ["image_record_missing"], done
        assert done["data"]["prunable"] == []
        assert not (second.state_dir / "images.json").exists(), "no record is made up"

        # Its own record: only what it built goes; an image a build of it found and
        # reused (another install's) stays, as does the first install's.
        record_built(second, [BuiltImage(id=second_own, kind="derived", base=pinned, name="own"),
                              BuiltImage(id=first_image, kind="writer", found=True)])  # fmt: skip
        code, done = wp("image", "prune", "--apply")
        assert code == 0 and codes(done) == ["image_removed"], done
        assert [i["id"] for i in done["data"]["prunable"]] == [second_own]
        present = podman("images", "-a", "-q", "--no-trunc")
        assert second_own not in present
        assert first_image in present and pinned in present

        write_config(make_checkout(tmp_path / "repo"))
        code, plan = wp("uninstall")
        assert code == 0 and first_image[:12] not in json.dumps(plan), plan
    finally:
        remove_images(first_image, second_own)
