"""The record of images writerpool built, what prune may remove, and derive's pip targets."""

from __future__ import annotations

import pytest

from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.images.derive import derive_source, image_setting
from writerpool.runtime.image import DEFAULT_IMAGES_DIR, load_definition
from writerpool.runtime.image_derive import PythonFacts, derive_argv
from writerpool.runtime.image_prune import LocalImage, prunable
from writerpool.runtime.image_uv import UV_VERSION, UV_WHEELS, uv_wheel
from writerpool.state.images import BuiltImage, check_name, forget, load_record, record_built

ROOTFS = "a" * 64
WRITER = "b" * 64
DERIVED = "c" * 64
OLD_WRITER = "d" * 64
NEWER_DERIVED = "e" * 64


def _local(*built: BuiltImage) -> list[LocalImage]:
    return [LocalImage(b, 1_000_000) for b in built]


CHAIN = (
    BuiltImage(id=ROOTFS, kind="rootfs"),
    BuiltImage(id=WRITER, kind="writer", base=ROOTFS),
    BuiltImage(id=DERIVED, kind="derived", base=WRITER, name="deps"),
    BuiltImage(id=OLD_WRITER, kind="writer", base=ROOTFS),
)


def test_record_keeps_build_order_and_the_base_of_a_reused_image() -> None:
    paths = Paths.from_env()
    assert load_record(paths).images == ()
    record_built(paths, CHAIN)
    record_built(paths, [BuiltImage(id=WRITER, kind="writer")])  # reused: no base known
    record = load_record(paths)
    assert [i.id for i in record.images] == [ROOTFS, DERIVED, OLD_WRITER, WRITER]
    assert record.by_id()[WRITER].base == ROOTFS
    assert (paths.state_dir / "images.json").stat().st_mode & 0o777 == 0o600


def test_the_newest_image_of_a_name_is_the_one_a_name_means() -> None:
    paths = Paths.from_env()
    record_built(paths, CHAIN)
    record_built(paths, [BuiltImage(id=NEWER_DERIVED, kind="derived", base=WRITER, name="deps")])
    assert image_setting(paths, "deps") == NEWER_DERIVED
    assert image_setting(paths, "default") == "default"
    assert image_setting(paths, WRITER) == WRITER
    with pytest.raises(WriterpoolError) as info:
        image_setting(paths, "other")
    assert info.value.code == "image_name_unknown"
    with pytest.raises(UsageError):
        image_setting(paths, "-rf")


def test_an_image_found_by_tag_is_this_installs_only_once_it_built_it() -> None:
    paths = Paths.from_env()
    record_built(paths, [BuiltImage(id=WRITER, kind="writer", found=True)])
    assert load_record(paths).found_ids() == {WRITER}, "reused: maybe another install's"
    record_built(paths, [BuiltImage(id=WRITER, kind="writer", base=ROOTFS)])
    record_built(paths, [BuiltImage(id=WRITER, kind="writer", found=True)])  # reused again
    assert load_record(paths).found_ids() == set(), "built here once: this install's"
    assert load_record(paths).by_id()[WRITER].base == ROOTFS
    text = (paths.state_dir / "images.json").read_text()
    assert '"found"' not in text, "a built image's entry is written as before"


def test_forget_drops_only_the_named_ids() -> None:
    paths = Paths.from_env()
    record_built(paths, CHAIN)
    forget(paths, [OLD_WRITER, "f" * 64])
    assert [i.id for i in load_record(paths).images] == [ROOTFS, WRITER, DERIVED]


def test_a_corrupt_record_is_reported_not_treated_as_empty() -> None:
    paths = Paths.from_env()
    paths.state_dir.mkdir(parents=True)
    (paths.state_dir / "images.json").write_text('{"schemaVersion": 1, "images": [{"id": 1}]}')
    with pytest.raises(WriterpoolError) as info:
        load_record(paths)
    assert info.value.code == "image_record_invalid"


def test_prune_keeps_what_is_used_and_every_image_it_was_built_on() -> None:
    images = _local(*CHAIN)
    # A mode uses the derived image: its writer image and root file system stay.
    assert [i.id for i in prunable(images, {DERIVED})] == [OLD_WRITER]
    # Nothing in use: all of them go.
    assert {i.id for i in prunable(images, set())} == {ROOTFS, WRITER, DERIVED, OLD_WRITER}
    # Only the old writer image in use: the derived image and its writer image go.
    assert {i.id for i in prunable(images, {OLD_WRITER})} == {WRITER, DERIVED}


def test_an_unrecorded_id_in_use_keeps_nothing_extra() -> None:
    images = _local(*CHAIN)
    assert {i.id for i in prunable(images, {"9" * 64})} == {ROOTFS, WRITER, DERIVED, OLD_WRITER}


@pytest.mark.parametrize("name", ["default", "Deps", "-x", "a/b", "a" * 64, "x" * 64, ""])
def test_names_that_could_be_mistaken_or_inject_are_refused(name: str) -> None:
    with pytest.raises(UsageError):
        check_name(name)


def test_pip_targets_the_images_python_and_glibc_only_as_wheels() -> None:
    facts = PythonFacts(version="3.13", glibc_minor=41, machine="x86_64")
    args = facts.pip_target_args()
    assert args[:7] == ["--only-binary=:all:", "--python-version", "3.13",
                        "--implementation", "cp", "--abi", "cp313"]  # fmt: skip
    platforms = [args[i + 1] for i, a in enumerate(args) if a == "--platform"]
    assert platforms[0] == "manylinux_2_41_x86_64" and "manylinux_2_17_x86_64" in platforms
    assert "manylinux_2_16_x86_64" not in platforms and "manylinux_2_42_x86_64" not in platforms
    assert platforms[-3:] == ["manylinux2014_x86_64", "manylinux2010_x86_64",
                              "manylinux1_x86_64"]  # fmt: skip
    arm = PythonFacts(version="3.13", glibc_minor=41, machine="aarch64").pip_target_args()
    assert arm[-2:] == ["--platform", "manylinux2014_aarch64"]


def test_the_derive_build_has_no_network_and_replaces_the_first_from() -> None:
    argv = derive_argv("deps", WRITER, Paths.from_env().state_dir / "Containerfile",
                       Paths.from_env().state_dir, Paths.from_env().state_dir / "iid")  # fmt: skip
    assert "--network=none" in argv and "--pull=never" in argv
    assert argv[argv.index("--from") + 1] == WRITER
    assert argv[argv.index("--tag") + 1] == "localhost/writerpool-derived:deps"
    assert argv[-2] == "--"


def test_derive_takes_exactly_one_source() -> None:
    paths = Paths.from_env()
    paths.state_dir.mkdir(parents=True)
    req = paths.state_dir / "requirements.txt"
    req.write_text("tiny==0.1\n")
    with pytest.raises(UsageError):
        derive_source(None, None, None)
    with pytest.raises(UsageError):
        derive_source(req, None, req)
    with pytest.raises(UsageError):
        derive_source(None, paths.state_dir, req)
    with pytest.raises(UsageError):
        derive_source(None, None, paths.state_dir / "missing.txt")
    found = derive_source(None, None, req).requirements
    assert found is not None and found.lines == ("tiny==0.1",)
    made = derive_source(req, None, None)
    assert made.context == paths.state_dir.resolve()


def test_the_uv_wheel_is_pinned_per_machine_and_is_an_image_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert set(UV_WHEELS) == {"x86_64", "aarch64"}
    for machine, (name, sha) in UV_WHEELS.items():
        assert name.startswith(f"uv-{UV_VERSION}-py3-none-manylinux_2_17_{machine}")
        assert len(sha) == 64 and uv_wheel(machine) == (name, sha)
    with pytest.raises(WriterpoolError) as info:
        uv_wheel("s390x")
    assert info.value.code == "image_build_failed"
    definition = load_definition("0.73.1", DEFAULT_IMAGES_DIR)
    before, rootfs = definition.inputs_digest(), definition.rootfs_digest()
    assert definition.uv.startswith(f"{UV_VERSION}:")
    monkeypatch.setitem(UV_WHEELS, "x86_64", (UV_WHEELS["x86_64"][0], "0" * 64))
    monkeypatch.setitem(UV_WHEELS, "aarch64", (UV_WHEELS["aarch64"][0], "0" * 64))
    assert definition.inputs_digest() != before
    assert definition.rootfs_digest() == rootfs, "uv changes only the top layer"
