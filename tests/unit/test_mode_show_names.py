"""`mode show` names a derived image by its name beside its ID, and the `mode set` command
it prints picks that image by name, which `--image` turns back into the same ID; an older
image of a name stays an ID (the name now picks another)."""

from __future__ import annotations

import shlex

import pytest

from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.images.derive import image_setting
from writerpool.pool.modes.show import reproduce_for, show_modes
from writerpool.state.images import BuiltImage, record_built

WRITER = "b" * 64
OLD = "c" * 64
NEWEST = "e" * 64
PLAIN = "f" * 64


def _store(paths: Paths, alias: str, image: str) -> None:
    settings = ContainerSettings(profiles=("code",), image=image, base="main")
    store_entry(paths, alias, ModeEntry(mode="container", container=settings))


def _image_word(command: str) -> str:
    words = shlex.split(command)
    return words[words.index("--image") + 1]


@pytest.fixture
def paths() -> Paths:
    paths = Paths.from_env()
    derived = [BuiltImage(id=i, kind="derived", base=WRITER, name="deps") for i in (OLD, NEWEST)]
    record_built(paths, [BuiltImage(id=WRITER, kind="writer"), *derived])
    for alias, image in (("new", NEWEST), ("old", OLD), ("own", PLAIN), ("std", "default")):
        _store(paths, alias, image)
    return paths


def test_the_newest_image_of_a_name_is_shown_and_set_by_that_name(paths: Paths) -> None:
    report = show_modes(paths, [], "new")
    finding = report.findings[0]
    assert f"image deps ({NEWEST})" in finding.message
    assert finding.data["imageName"] == "deps" and finding.data["intent"]["image"] == NEWEST
    command = finding.data["command"]
    assert _image_word(command) == "deps" and "--image deps --network" in command
    assert report.data["workspaces"][0]["imageName"] == "deps"
    # The printed command stores exactly what is stored now.
    assert image_setting(paths, _image_word(command)) == NEWEST
    assert reproduce_for(paths, "new") == command


def test_an_older_image_of_a_name_stays_an_id_and_says_what_the_name_picks(paths: Paths) -> None:
    finding = show_modes(paths, [], "old").findings[0]
    assert _image_word(finding.data["command"]) == OLD
    assert f"image {OLD} (derived as deps, which now names {NEWEST[:12]})" in finding.message
    assert finding.data["imageName"] == "deps"


def test_images_writerpool_did_not_derive_and_the_default_are_shown_as_stored(
    paths: Paths,
) -> None:
    for alias, word in (("own", PLAIN), ("std", "default")):
        finding = show_modes(paths, [], alias).findings[0]
        assert _image_word(finding.data["command"]) == word
        assert "imageName" not in finding.data


def test_an_unreadable_image_record_shows_ids_and_still_answers(paths: Paths) -> None:
    (paths.state_dir / "images.json").write_text("{not json")
    finding = show_modes(paths, [], "new").findings[0]
    assert _image_word(finding.data["command"]) == NEWEST and "imageName" not in finding.data


def test_image_takes_a_derived_name_and_refuses_unknown_ones_by_code(paths: Paths) -> None:
    assert image_setting(paths, "deps") == NEWEST
    with pytest.raises(WriterpoolError) as info:
        image_setting(paths, "nosuch")
    assert info.value.code == "image_name_unknown" and info.value.exit_code == 1
    for bad in ("Deps", "-x", "a/b", "0deps", "e" * 65):
        with pytest.raises(UsageError) as usage:
            image_setting(paths, bad)
        assert usage.value.code == "usage_invalid"
