"""The default writer image carries pip and venv: inside a writer (no network), a project
makes its own virtualenv and installs a wheel it ships; the image's Python stays Debian's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_collect_helpers import (
    ready_writer,
    run_agent,
    unique_alias,
    write_workspaces,
)
from tests.support.wheels import WHEEL_FILE, make_project, make_wheel

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

VENV_AND_PIP = (
    "python3 -m venv /tmp/venv; "
    "/tmp/venv/bin/pip install -q --no-index --disable-pip-version-check "
    f"dist/{WHEEL_FILE}; "
    "/tmp/venv/bin/python -m unittest -q 2>&1 | tail -n 1; "
    "echo pip=$(/tmp/venv/bin/pip --version | cut -d' ' -f1); "
    "python3 -c 'import tinycalc' 2>/dev/null && echo system=has-tinycalc || echo system=clean; "
    "python3 -m pip install -q --no-index dist/*.whl 2>/dev/null && echo system-pip=installed "
    "|| echo system-pip=refused"
)


def test_a_writer_makes_a_venv_and_installs_a_shipped_wheel_with_pip(
    tmp_path: Path, image_pin: Path
) -> None:
    wheels = tmp_path / "wheels"
    make_wheel(wheels)
    alias = unique_alias("venv")
    write_workspaces({alias: make_project(tmp_path / "project", wheel_dir=wheels)})
    writer = ready_writer(alias)
    out = run_agent(writer, VENV_AND_PIP).splitlines()
    assert out[0] == "OK", out
    assert "pip=pip" in out
    # The image's own Python stays as Debian made it: pip does not install into it.
    assert "system=clean" in out and "system-pip=refused" in out
