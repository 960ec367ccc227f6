"""Whether an image carries a command is the shell's answer inside it; a container that
did not run (a podman error) is podman_unavailable, never "the tool is missing"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from writerpool.errors import WriterpoolError
from writerpool.runtime.image_derive import image_has_command

IMAGE = "a" * 64


@pytest.fixture
def podman_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A podman on PATH that runs the container's shell command itself, on the host,
    unless tmp_path/fail holds an exit status and a message for it to fail with."""
    fake = tmp_path / "bin" / "podman"
    fake.parent.mkdir()
    fake.write_text(f"""#!/bin/sh
if [ -e {tmp_path / "fail"} ]; then
    read -r status message < {tmp_path / "fail"}
    echo "Error: $message" >&2
    exit "$status"
fi
while [ "$1" != "sh" ]; do shift; done
exec "$@"
""")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "fail"


def test_a_command_on_the_path_is_found_and_an_absent_one_is_not(podman_exits: Path) -> None:
    assert image_has_command(IMAGE, "sh")
    assert not image_has_command(IMAGE, "no-such-tool-here")


@pytest.mark.parametrize("status", [125, 126, 127, 1])
def test_a_container_that_did_not_run_is_podman_unavailable(
    podman_exits: Path, status: int
) -> None:
    podman_exits.write_text(f"{status} creating container storage: layer not known\n")
    with pytest.raises(WriterpoolError) as failed:
        image_has_command(IMAGE, "uv")
    assert failed.value.code == "podman_unavailable"
    assert f"exit {status}" in failed.value.message and "layer not known" in failed.value.message
