"""`writerpool image derive` for real: the host's pip fills a wheelhouse from a local wheel
(no index is asked), `podman build --network=none` installs it FROM the pinned image;
a Containerfile's first FROM becomes the pinned image; `--cache` options need their tool.
Every image a test derives is removed by the test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, make_checkout, podman, wp, write_config
from tests.support.wheels import make_wheel, requirements_for
from writerpool.config.paths import Paths
from writerpool.proc import run
from writerpool.runtime.podman import podman_env
from writerpool.state.images import load_record

pytestmark = [pytest.mark.podman, pytest.mark.image]


@pytest.fixture
def derived() -> Iterator[list[str]]:
    """Names of derived images the test made; their tags and images go afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        run(["podman", "rmi", "--force", "--ignore", f"localhost/writerpool-derived:{name}"],
            env=podman_env(), timeout=120, check=False)  # fmt: skip


def _in_image(image_id: str, script: str) -> str:
    # As the account's own uid, like a writer (pi refuses to run as root).
    return podman("run", "--rm", "--pull=never", "--network=none", "--read-only",
                  "--userns=keep-id", image_id, "sh", "-ec", script)  # fmt: skip


def test_derive_from_requirements_installs_the_wheel_with_no_network(
    tmp_path: Path, image_pin: Path, derived: list[str]
) -> None:
    pinned = json.loads(image_pin.read_text())["imageId"]
    requirements = requirements_for(make_wheel(tmp_path / "wheels").parent,
                                    tmp_path / "requirements.txt")  # fmt: skip
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
    before = podman("images", "-q", "--no-trunc")
    rc, report = wp("image", "derive", *args)
    assert rc == 2 and report["findings"][0]["code"] == code, report
    assert podman("images", "-q", "--no-trunc") == before


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
