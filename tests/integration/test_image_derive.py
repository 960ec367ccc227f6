"""`writerpool image derive` for real: the host's pip fills a wheelhouse from a local wheel
(no index is asked), `podman build --network=none` installs it FROM the pinned image;
other wheels under the same name make a new image holding them (never a cached layer of
the old ones), the same wheels keep the image; a wheel whose dependency pip would build
is stopped before the build runs; a Containerfile's first FROM becomes the pinned image;
`--cache` options need their tool. Every image a test derives is removed by the test."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import codes, make_checkout, podman, wp, write_config
from tests.support.images import remove_images
from tests.support.packages import index_routes, make_marker_package, plain_pip_download
from tests.support.registry import registry
from tests.support.wheels import find_links_env, make_wheel, requirements_for
from writerpool.config.paths import Paths
from writerpool.runtime.image_derive import LABEL_DERIVED
from writerpool.state.images import load_record

pytestmark = [pytest.mark.podman, pytest.mark.image]


@pytest.fixture
def derived() -> Iterator[list[str]]:
    """Names of derived images the test made; their tags and images go afterwards."""
    names: list[str] = []
    yield names
    if names:
        remove_images(*(f"localhost/writerpool-derived:{name}" for name in names))


def _in_image(image_id: str, script: str) -> str:
    # As the account's own uid, like a writer (pi refuses to run as root).
    return podman("run", "--rm", "--pull=never", "--network=none", "--read-only",
                  "--userns=keep-id", image_id, "sh", "-ec", script)  # fmt: skip


def test_derive_from_requirements_installs_the_wheel_with_no_network(
    tmp_path: Path, image_pin: Path, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    for key, value in find_links_env(make_wheel(tmp_path / "wheels").parent).items():
        monkeypatch.setenv(key, value)
    requirements = requirements_for(tmp_path / "requirements.txt")
    derived.append("calcdeps")
    code, report = wp("image", "derive", "calcdeps", "--requirements", str(requirements))
    assert code == 0 and codes(report) == ["image_derived"], report
    image_id = report["data"]["imageId"]
    assert report["data"]["baseId"] == pinned
    out = _in_image(image_id, "python3 -c 'import tinycalc, sys; print(tinycalc.add(2, 3), "
                              "sys.prefix)'; pi --version 2>&1; command -v pip")  # fmt: skip
    assert out.splitlines() == ["5 /opt/venv", "0.73.1", "/opt/venv/bin/pip"]
    history = podman("image", "inspect", "--format", "{{.Parent}} {{len .RootFS.Layers}}",
                     image_id)  # fmt: skip
    base_layers = podman("image", "inspect", "--format", "{{len .RootFS.Layers}}", pinned)
    assert int(history.split()[-1]) > int(base_layers), "built on top of the pinned image"
    missing = podman("run", "--rm", "--pull=never", "--network=none", pinned, "sh", "-c",
                     "python3 -c 'import tinycalc' 2>/dev/null || echo absent")  # fmt: skip
    assert missing.strip() == "absent", "the pinned image itself is unchanged"
    record = load_record(Paths.from_env()).named("calcdeps")
    assert record is not None and (record.id, record.base) == (image_id, pinned)


def _derive_ok(name: str, requirements: Path) -> dict[str, Any]:
    code, report = wp("image", "derive", name, "--requirements", str(requirements))
    assert code == 0, report
    return report


def _tinycalc(image_id: str) -> list[str]:
    """The module's version/note and the dist-info folders the image's venv holds."""
    return _in_image(image_id, "python3 -c 'import tinycalc as t; print(t.VERSION + \"/\" + "
                               "t.NOTE)'; ls /opt/venv/lib/python3*/site-packages | "
                               "grep ^tinycalc-").splitlines()  # fmt: skip


def _serve(monkeypatch: pytest.MonkeyPatch, url: str, ca: Path) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", f"{url}/simple/")
    monkeypatch.setenv("PIP_CERT", str(ca))
    # pip's HTTP client prefers these to PIP_CERT: a caller's bundle would hide the index's CA.
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


def test_other_wheels_under_one_name_build_a_new_image_and_the_same_wheels_keep_it(
    tmp_path: Path, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = (make_wheel(tmp_path / "wheels", version) for version in ("0.1", "0.2"))
    # The same file name as `new`, other bytes: only its hash tells them apart.
    rebuilt = make_wheel(tmp_path / "rebuilt", "0.2", note="rebuilt")
    made: list[str] = []
    try:
        with registry(tmp_path / "index", index_routes(
                {w.name: w.read_bytes() for w in (old, new)})) as index:  # fmt: skip
            _serve(monkeypatch, index.loopback, index.ca)
            first = _derive_ok("twice", requirements_for(tmp_path / "r1.txt", "0.1"))
            made.append(first["data"]["imageId"])
            second = _derive_ok("twice", requirements_for(tmp_path / "r2.txt", "0.2"))
            made.append(second["data"]["imageId"])
            again = _derive_ok("twice", tmp_path / "r2.txt")
        with registry(
            tmp_path / "index2", index_routes({rebuilt.name: rebuilt.read_bytes()})
        ) as index:
            _serve(monkeypatch, index.loopback, index.ca)
            third = _derive_ok("twice", tmp_path / "r2.txt")
            made.append(third["data"]["imageId"])
        assert codes(first) == codes(second) == codes(third) == ["image_derived"]
        assert len(set(made)) == 3, "each other set of wheels is a new image"
        assert _tinycalc(made[0]) == ["0.1/", "tinycalc-0.1.dist-info"]
        assert _tinycalc(made[1]) == ["0.2/", "tinycalc-0.2.dist-info"], "new wheel, not old"
        assert _tinycalc(made[2]) == ["0.2/rebuilt", "tinycalc-0.2.dist-info"]
        assert third["data"]["wheels"] == [
            {"file": rebuilt.name, "sha256": hashlib.sha256(rebuilt.read_bytes()).hexdigest()}
        ]
        assert codes(again) == ["image_derive_reused"] and again["data"]["reused"] is True
        assert again["data"]["imageId"] == made[1] and again["data"]["key"] == second["data"]["key"]
        assert again["findings"][0]["message"].startswith(f"reused {made[1][:12]}")
        tagged = podman(
            "image", "inspect", "--format", "{{.Id}}", "localhost/writerpool-derived:twice"
        )
        record = load_record(Paths.from_env()).named("twice")
        assert tagged.strip() == made[2] and record is not None and record.id == made[2]
    finally:
        if made:
            remove_images(*made)


def test_a_wheel_whose_dependency_pip_would_build_is_stopped_before_the_build(
    tmp_path: Path, image_pin: Path, derived: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A plain name passes every check; the wheel pip finds for it depends on a directory.
    marker = tmp_path / "MARKER"
    package = make_marker_package(tmp_path / "src", marker)
    wheel = make_wheel(tmp_path / "wheels", "0.3", requires=(f"evil @ {package.as_uri()}",))
    for key, value in find_links_env(wheel.parent).items():
        monkeypatch.setenv(key, value)
    derived.append("urldep")
    code, report = wp("image", "derive", "urldep", "--requirements",
                      str(requirements_for(tmp_path / "r.txt", "0.3")))  # fmt: skip
    assert not marker.exists(), "the dependency's setup.py ran on the host"
    assert code == 1 and codes(report) == ["image_derive_build_refused"], report
    message = report["findings"][0]["message"]
    assert "Processing evil (from tinycalc==0.3" in message, report
    assert load_record(Paths.from_env()).named("urldep") is None
    # The control: pip as the unguarded derive ran it builds the dependency.
    plain_pip_download(tmp_path / "plain", "--no-index", "--find-links", str(wheel.parent),
                       "tinycalc==0.3")  # fmt: skip
    assert marker.read_text() == "setup.py ran", "the trap is live: plain pip built it"


def test_derive_from_a_containerfile_replaces_its_first_from(
    tmp_path: Path, image_pin: Path, derived: list[str]
) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "hello.txt").write_text("from the context\n")
    # Whatever the file names, the build starts from the pinned image.
    (context / "Containerfile").write_text(
        "FROM docker.invalid/nothing:latest\nCOPY hello.txt /opt/hello.txt\n"
    )
    derived.append("withfile")
    code, report = wp("image", "derive", "withfile", "--containerfile",
                      str(context / "Containerfile"))  # fmt: skip
    assert code == 0, report
    out = _in_image(report["data"]["imageId"], "cat /opt/hello.txt; command -v pi")
    assert out.splitlines() == ["from the context", "/usr/local/bin/pi"]


def test_a_build_that_needs_the_network_fails_and_records_nothing(
    tmp_path: Path, image_pin: Path, derived: list[str]
) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Containerfile").write_text(
        # Passes only where the build has a network interface besides loopback.
        "FROM x\nRUN python3 -c \"import sys; lines = open('/proc/net/dev').readlines()[2:]; "
        "sys.exit([ln.split(':')[0].strip() for ln in lines] == ['lo'])\"\n"
    )
    derived.append("needsnet")
    code, report = wp("image", "derive", "needsnet", "--containerfile",
                      str(context / "Containerfile"))  # fmt: skip
    assert code == 1 and codes(report) == ["image_derive_failed"], report
    assert load_record(Paths.from_env()).named("needsnet") is None


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["default", "--requirements", "/dev/null"], "usage_invalid"),
        (["ok", "--requirements", "/nonexistent/req.txt"], "usage_invalid"),
        (["ok"], "usage_invalid"),
    ],
)
def test_bad_derive_input_is_refused_and_builds_nothing(
    image_pin: Path, args: list[str], code: str
) -> None:
    # Derived images carry their label (tests beside this one may build other images).
    derived = ("images", "-q", "--no-trunc", "--filter", f"label={LABEL_DERIVED}")
    before = podman(*derived)
    rc, report = wp("image", "derive", *args)
    assert rc == 2 and report["findings"][0]["code"] == code, report
    assert podman(*derived) == before


def test_cache_options_need_their_tool_in_the_image(
    tmp_path: Path, image_pin: Path, derived: list[str]
) -> None:
    write_config(make_checkout(tmp_path / "repo"))
    # The default image carries uv, not a Go toolchain.
    code, plan = wp("mode", "set", "demo", "container", "--profiles", "code", "--cache", "uv")
    assert code == 0 and "cache_tool_missing" not in codes(plan), plan
    code, report = wp("mode", "set", "demo", "container", "--profiles", "code", "--cache", "go")
    assert code == 1 and codes(report) == ["cache_tool_missing"], report
    assert not Paths.from_env().modes_file.exists(), "a refusal stores nothing"
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "go").write_text("#!/bin/sh\necho go version go0.0-test\n")
    (context / "Containerfile").write_text("FROM x\nCOPY --chmod=0755 go /usr/local/bin/go\n")
    derived.append("hasgo")
    rc, built = wp("image", "derive", "hasgo", "--containerfile", str(context / "Containerfile"))
    assert rc == 0, built
    code, plan = wp("mode", "set", "demo", "container", "--profiles", "code", "--cache", "go",
                    "--image", "hasgo")  # fmt: skip
    assert code == 0 and "cache_tool_missing" not in codes(plan), plan
    rc, unknown = wp("mode", "set", "demo", "container", "--profiles", "code",
                     "--image", "nosuchname")  # fmt: skip
    assert rc == 1 and codes(unknown) == ["image_name_unknown"], unknown
