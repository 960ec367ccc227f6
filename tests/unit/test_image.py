"""The writer image's definition, inputs digest, pin and parsed Podman output (no processes)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.runtime import image_tools
from writerpool.runtime.image import (
    DEFAULT_IMAGES_DIR,
    ImageDefinition,
    load_definition,
    load_pin,
    parse_image_list,
    parse_pin,
    resolve_image,
    save_pin,
)
from writerpool.runtime.image_build import (
    PiSource,
    Progress,
    build_image,
    check_pi_source,
    mmdebstrap_argv,
    podman_build_argv,
)

ID_A = "f04682e6090c03454ad0a156747ca6e377b944027f610553639e3126f9f77422"
ID_B = "74bb4afecc01" + "0" * 52
DIGEST = "e1720ce21204564b8fe42c0a9bcb459ea32ce00da13bde7fc449faa49a20f765"

# `podman images --filter label=io.writerpool.inputs=… --format json` (Podman 4.3.1), trimmed.
RECORDED_IMAGES = f"""[
    {{"Id": "{ID_B}", "ParentId": "", "RepoTags": null, "Labels": null, "Created": 1796039500,
      "Names": ["localhost/writerpool-rootfs:25793d2663c4e5aa"]}},
    {{"Id": "{ID_A}", "ParentId": "b66f6ff61e28", "RepoTags": null,
      "Labels": {{"io.buildah.version": "1.28.2", "io.writerpool.inputs": "{DIGEST}",
                 "io.writerpool.version": "0.1.0"}},
      "Created": 1796039557, "Names": ["localhost/writerpool-writer:0.1.0"]}}
]"""


@pytest.fixture
def images_dir(tmp_path: Path) -> Path:
    """A private copy of the repository's images/ that a test may edit."""
    return Path(shutil.copytree(DEFAULT_IMAGES_DIR, tmp_path / "images"))


def _definition(directory: Path, **kwargs: str) -> ImageDefinition:
    return load_definition("0.73.1", directory, **kwargs)


def _edit_packages(directory: Path, old: str, new: str) -> None:
    toml = directory / "rootfs.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


# ------------------------------------------------------------------- inputs digest


def test_inputs_digest_is_stable_for_unchanged_inputs(images_dir: Path) -> None:
    first = _definition(images_dir).inputs_digest()
    assert first == _definition(images_dir).inputs_digest()
    assert first == _definition(DEFAULT_IMAGES_DIR).inputs_digest()
    assert len(first) == 64


def test_adding_a_package_changes_both_digests(images_dir: Path) -> None:
    before = _definition(images_dir)
    _edit_packages(images_dir, '"bash",', '"bash",\n    "make",')
    after = _definition(images_dir)
    assert after.inputs_digest() != before.inputs_digest()
    assert after.rootfs_digest() != before.rootfs_digest()


def test_package_order_and_duplicates_do_not_change_the_digest(images_dir: Path) -> None:
    before = _definition(images_dir).inputs_digest()
    _edit_packages(images_dir, '"bash",', '"nodejs",\n    "bash",\n    "bash",')
    assert _definition(images_dir).inputs_digest() == before


def test_containerfile_change_rebuilds_the_image_but_keeps_the_root_file_system(
    images_dir: Path,
) -> None:
    before = _definition(images_dir)
    containerfile = images_dir / "Containerfile"
    containerfile.write_text(containerfile.read_text() + 'LABEL extra="1"\n')
    after = _definition(images_dir)
    assert after.inputs_digest() != before.inputs_digest()
    assert after.rootfs_digest() == before.rootfs_digest()


def test_launcher_pi_and_writerpool_versions_are_inputs(images_dir: Path) -> None:
    base = _definition(images_dir).inputs_digest()
    assert load_definition("0.73.2", images_dir).inputs_digest() != base
    assert load_definition("0.73.1", images_dir, writerpool_version="9.9").inputs_digest() != base
    assert load_definition("0.73.1", images_dir, agents="x@1=sha512-a").inputs_digest() != base
    launcher = images_dir / "pi-launcher"
    launcher.write_text(launcher.read_text() + "# changed\n")
    changed = _definition(images_dir).inputs_digest()
    assert changed != base
    forwarder = images_dir / "egress-forwarder"
    forwarder.write_text(forwarder.read_text() + "# changed\n")
    assert _definition(images_dir).inputs_digest() not in (base, changed)


def test_clonetool_and_harness_are_inputs(
    images_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "package"
    shutil.copytree(image_tools.CLONETOOL_SOURCE, package / "clonetool")
    shutil.copytree(image_tools.HARNESS_SOURCE, package / "harness")
    monkeypatch.setattr(image_tools, "CLONETOOL_SOURCE", package / "clonetool")
    monkeypatch.setattr(image_tools, "HARNESS_SOURCE", package / "harness")
    base = _definition(images_dir).inputs_digest()
    assert base == _definition(DEFAULT_IMAGES_DIR).inputs_digest()
    scan = package / "clonetool" / "scan.py"
    scan.write_text(scan.read_text() + "# changed\n")
    changed = _definition(images_dir).inputs_digest()
    probes = package / "harness" / "allowlist.py"
    probes.write_text(probes.read_text() + "# changed\n")
    assert len({base, changed, _definition(images_dir).inputs_digest()}) == 3
    staged = image_tools.stage_tools(tmp_path / "context")
    assert (staged / "clonetool" / "scan.py").read_bytes() == scan.read_bytes()
    harness = staged / image_tools.HARNESS_NAME
    assert (staged / "clonetool" / "__main__.py").is_file()
    assert harness.read_bytes() == image_tools.harness_archive()
    assert stat.S_IMODE(harness.stat().st_mode) == 0o644


def test_mirror_override_changes_the_digest_and_reaches_mmdebstrap(images_dir: Path) -> None:
    base = _definition(images_dir)
    other = _definition(images_dir, mirror="https://mirror.example.org/debian/")
    assert other.rootfs_digest() != base.rootfs_digest()
    argv = mmdebstrap_argv(other, Path("/cache/rootfs.tar.partial"))
    assert argv[-3:] == ["trixie", "/cache/rootfs.tar.partial", "https://mirror.example.org/debian"]


@pytest.mark.parametrize(
    "mirror", ["-o evil", "ftp://example.org/debian", "http://a b", "http://x,y"]
)
def test_a_bad_mirror_is_a_usage_error(images_dir: Path, mirror: str) -> None:
    with pytest.raises(UsageError) as info:
        _definition(images_dir, mirror=mirror)
    assert "mirror" in info.value.message


def test_an_option_shaped_package_name_is_refused(images_dir: Path) -> None:
    _edit_packages(images_dir, '"bash",', '"--hook-dir=/tmp",')
    with pytest.raises(UsageError) as info:
        _definition(images_dir)
    assert "packages" in info.value.message


def test_a_missing_definition_file_is_image_build_failed(images_dir: Path) -> None:
    (images_dir / "Containerfile").unlink()
    with pytest.raises(WriterpoolError) as info:
        _definition(images_dir)
    assert info.value.code == "image_build_failed"


def test_shipped_package_list_has_what_writers_need() -> None:
    packages = set(_definition(DEFAULT_IMAGES_DIR).rootfs.packages)
    assert {"bash", "git", "ripgrep", "fd-find", "python3", "nodejs", "ca-certificates"} <= packages
    assert "python3-minimal" not in packages


# ------------------------------------------------------------------------- argv


def test_mmdebstrap_runs_unprivileged_and_ends_options_before_positionals(
    images_dir: Path,
) -> None:
    argv = mmdebstrap_argv(_definition(images_dir), Path("/c/r.tar"))
    assert argv[:4] == ["mmdebstrap", "--mode=unshare", "--variant=minbase", "--format=tar"]
    assert argv[-4:] == ["--", "trixie", "/c/r.tar", "http://deb.debian.org/debian"]
    include = next(a for a in argv if a.startswith("--include="))
    assert "python3" in include.split("=", 1)[1].split(",")


def test_podman_build_pulls_nothing_and_labels_the_inputs(images_dir: Path) -> None:
    definition = _definition(images_dir)
    argv = podman_build_argv(definition, ID_B, Path("/pi"), Path("/iid"), force=False,
                             uv_context=Path("/uv"), tools_context=Path("/t"),
                             agents_context=Path("/a"))  # fmt: skip
    assert "--pull=never" in argv and "agents=/a" in argv and "--network=none" in argv
    assert f"io.writerpool.inputs={definition.inputs_digest()}" in argv
    assert f"io.writerpool.version={definition.writerpool_version}" in argv
    assert f"BASE={ID_B}" in argv and "pi=/pi" in argv and "uv=/uv" in argv and "tools=/t" in argv
    tag = argv[argv.index("--tag") + 1]
    assert tag == f"localhost/writerpool-writer:{definition.writerpool_version}"
    assert argv[-1] == str(images_dir) and "--no-cache" not in argv
    assert "--no-cache" in podman_build_argv(definition, ID_B, Path("/p"), Path("/i"), force=True,
                                             uv_context=Path("/uv"),
                                             tools_context=Path("/t"),
                                             agents_context=Path("/a"))  # fmt: skip


# -------------------------------------------------------------------------- pin


def _pin_json(**overrides: object) -> bytes:
    data: dict[str, object] = {
        "schemaVersion": 1, "imageId": ID_A, "inputsDigest": DIGEST, "writerpoolVersion": "0.1.0",
    }  # fmt: skip
    data.update(overrides)
    return json.dumps(data).encode()


def test_a_valid_pin_parses() -> None:
    pin = parse_pin(_pin_json())
    assert (pin.image_id, pin.inputs_digest, pin.writerpool_version) == (ID_A, DIGEST, "0.1.0")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{not json",
        b"[]",
        _pin_json(imageId=ID_A[:12]),
        _pin_json(imageId=ID_A.upper()),
        _pin_json(schemaVersion=2),
        _pin_json(extra="x"),
        json.dumps({"schemaVersion": 1, "imageId": ID_A}).encode(),
    ],
)
def test_a_corrupt_pin_is_image_unavailable(raw: bytes) -> None:
    with pytest.raises(WriterpoolError) as info:
        parse_pin(raw)
    assert info.value.code == "image_unavailable"


def test_pin_round_trips_with_private_mode() -> None:
    paths = Paths.from_env()
    assert load_pin(paths) is None
    save_pin(paths, ID_A, DIGEST, "0.1.0")
    assert stat.S_IMODE(paths.image_pin_file.stat().st_mode) == 0o600
    assert json.loads(paths.image_pin_file.read_text()) == json.loads(_pin_json())
    loaded = load_pin(paths)
    assert loaded is not None and loaded.image_id == ID_A


def test_corrupt_pin_file_makes_load_pin_and_resolve_fail() -> None:
    paths = Paths.from_env()
    paths.state_dir.mkdir(parents=True)
    paths.image_pin_file.write_text('{"schemaVersion": 1, "imageId": "nope"}')
    for call in (lambda: load_pin(paths), lambda: resolve_image(paths, "default")):
        with pytest.raises(WriterpoolError) as info:
            call()
        assert info.value.code == "image_unavailable"


def test_resolve_without_a_pin_is_image_unavailable() -> None:
    with pytest.raises(WriterpoolError) as info:
        resolve_image(Paths.from_env(), "default")
    assert info.value.code == "image_unavailable"
    assert "writerpool image build" in info.value.message


@pytest.mark.parametrize("setting", ["latest", ID_A[:12], "-" + ID_A[1:], ID_A.upper()])
def test_resolve_refuses_settings_that_are_not_a_full_id(setting: str) -> None:
    with pytest.raises(UsageError):
        resolve_image(Paths.from_env(), setting)


# ----------------------------------------------------------------- podman output


def test_recorded_image_list_parses_into_models() -> None:
    images = parse_image_list(RECORDED_IMAGES)
    assert [i.id for i in images] == [ID_B, ID_A]
    assert images[0].label("io.writerpool.inputs") is None
    assert images[1].label("io.writerpool.inputs") == DIGEST


@pytest.mark.parametrize("raw", ["", "null", "[]"])
def test_an_empty_image_list_is_empty(raw: str) -> None:
    assert parse_image_list(raw) == []


def test_unexpected_image_json_is_podman_unavailable() -> None:
    with pytest.raises(WriterpoolError) as info:
        parse_image_list('[{"Id": "short"}]')
    assert info.value.code == "podman_unavailable"


# --------------------------------------------------------------------- progress


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_progress_shows_tool_output_only_when_verbose() -> None:
    quiet, loud = _Sink(), _Sink()
    for sink, verbose in ((quiet, False), (loud, True)):
        progress = Progress(sink, verbose=verbose)  # type: ignore[arg-type]
        progress.step("importing")
        progress.output(b"I: downloading\n")
    assert quiet.text == "image: importing\n"
    assert loud.text == "image: importing\nI: downloading\n"


# ------------------------------------------------------------- npm before the slow steps

PROXY_CERT = (
    "npm cannot reach its registry: code SELF_SIGNED_CERT_IN_CHAIN (CA variables set: "
    "none); behind an intercepting proxy, export NODE_EXTRA_CA_CERTS"
)


def _no_install() -> Path:
    raise AssertionError("pi is never installed when npm cannot reach its registry")


def _no_agents(context: Path) -> Path:
    raise AssertionError(f"no agent is staged into {context} when npm cannot reach it")


@pytest.mark.skipif(os.geteuid() == 0, reason="image build refuses root before any step")
def test_an_unreachable_registry_stops_the_build_before_mmdebstrap(images_dir: Path) -> None:
    sink = io.StringIO()
    pi = PiSource(lambda: False, lambda: PROXY_CERT, _no_install, _no_agents)
    paths = Paths.from_env()
    # --force: no image is reused, so mmdebstrap would be the next step.
    with pytest.raises(WriterpoolError) as caught:
        build_image(paths, _definition(images_dir), pi, Progress(sink, verbose=False), force=True)
    assert caught.value.code == "npm_registry_unreachable"
    assert "NODE_EXTRA_CA_CERTS" in caught.value.message
    assert caught.value.message.endswith("nothing was built")
    assert (
        sink.getvalue()
        == "image: checking that npm reaches its registry (the agents are installed from it)\n"
    )
    assert not list(paths.image_cache_dir.glob("rootfs-*")), "no root file system was begun"
    assert not (paths.state_dir / "images.json").exists()


def test_an_installed_pi_needs_no_registry() -> None:
    sink = io.StringIO()
    check_pi_source(PiSource(lambda: True, lambda: PROXY_CERT, _no_install, _no_agents),
                    Progress(sink, verbose=False))  # fmt: skip
    assert sink.getvalue() == ""
    check_pi_source(PiSource(lambda: False, lambda: None, _no_install, _no_agents),
                    Progress(sink, verbose=False))  # fmt: skip
    assert sink.getvalue().startswith("image: checking that npm reaches its registry")
