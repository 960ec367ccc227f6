"""`writerpool doctor --json` for real, as the current (unprivileged) user, with a fresh
`config init` configuration and writerpool state under tmp_path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import wp
from tests.support import require_tool
from writerpool.proc import run
from writerpool.runtime.podman import podman_env

pytestmark = pytest.mark.podman


def _doctor() -> tuple[int, dict[str, Any], dict[str, list[dict[str, Any]]]]:
    code, report = wp("doctor")
    by_code: dict[str, list[dict[str, Any]]] = {}
    for finding in report["findings"]:
        by_code.setdefault(finding["code"], []).append(finding)
    return code, report, by_code


def test_doctor_on_this_host_finds_no_error_except_possibly_the_image() -> None:
    require_tool("podman")
    assert wp("config", "init")[0] == 0
    code, report, by_code = _doctor()
    assert report["command"] == "doctor" and report["schemaVersion"] == 1
    errors = [f for f in report["findings"] if f["status"] == "error"]
    assert [f for f in errors if f["code"] != "writer_image"] == [], errors
    # Exit status follows the worst severity: 2 errors, 1 warnings, 0 all ok.
    statuses = {f["status"] for f in report["findings"]}
    expected = 2 if "error" in statuses else 1 if "warning" in statuses else 0
    assert code == expected == report["data"]["exitCode"]
    # What doctor read from Podman is what Podman says.
    version = run(["podman", "version", "--format", "{{.Client.Version}}"], env=podman_env(),
                  timeout=60).out.strip()  # fmt: skip
    assert by_code["podman_usable"][0]["data"]["version"] == version
    assert by_code["config_file"][0]["status"] == "ok"
    assert {f["target"] for f in by_code["profile_provider"]} == {"profile/review", "profile/code"}
    assert by_code["lease_dir"][0]["data"] == {"exists": False}
    for finding in report["findings"]:
        assert str(Path.home()) not in json.dumps(finding)


def _image_exists(image_id: str) -> bool:
    done = run(["podman", "image", "exists", image_id], env=podman_env(), timeout=60, check=False)
    return done.returncode == 0


@pytest.mark.image
def test_doctor_runs_a_trial_container_of_the_pinned_image(image_pin: Path) -> None:
    require_tool("podman")
    image_id = json.loads(image_pin.read_text())["imageId"]
    assert wp("config", "init")[0] == 0
    before = _image_exists(image_id)
    _, _, by_code = _doctor()
    if before != _image_exists(image_id):
        pytest.skip("the pinned image was rebuilt or removed while doctor ran")
    image, runtime = by_code["writer_image"][0], by_code["oci_runtime"][0]
    # Doctor agrees with Podman about the pinned image, and tries it only when present.
    assert image["status"] == ("ok" if before else "error"), image
    assert runtime["data"]["tried"] is before
    assert runtime["status"] == "ok", runtime
    # The trial container (named for this process: tests beside this one run their own)
    # removed itself.
    mine = f"name=^writerpool-doctor-{os.getpid()}$"
    left = run(["podman", "ps", "-a", "--filter", "label=io.writerpool.role=doctor",
                "--filter", mine, "-q"], env=podman_env(), timeout=60).out.strip()  # fmt: skip
    assert left == ""
