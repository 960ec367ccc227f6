"""writerpool installed as a user installs it: a wheel built from this tree, installed
non-editable into a fresh virtualenv, run from outside the source tree. Its own
`image build` reads the definition shipped in the package (and reuses the image the test
run built, as the inputs are the same), and one coding session runs in a writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e import harness
from tests.e2e.conftest import WROTE_TEXT, MakeServer
from tests.integration.writers_support import make_checkout, writer_containers

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

SOURCE = Path(__file__).resolve().parents[2]
# Read at import, before the autouse isolation moves HOME: pip's cache of the real
# account, so that a run downloads each dependency once.
PIP_CACHE = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable))
WRITER = "boxed-w1"


def _run(argv: list[str], cwd: Path, timeout: float = 900) -> str:
    env = {**os.environ, "PIP_CACHE_DIR": str(PIP_CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    assert done.returncode == 0, f"{argv[:3]} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout


def _wp(venv: Path, cwd: Path, *args: str) -> dict[str, Any]:
    out = _run([str(venv / "bin" / "writerpool"), *args, "--json"], cwd)
    report: dict[str, Any] = json.loads(out)
    return report


def _install_wheel(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(SOURCE)],
         cwd=tmp_path)  # fmt: skip
    wheels = sorted(dist.glob("writerpool-*.whl"))
    assert len(wheels) == 1
    venv = tmp_path / "venv"
    _run([str(BASE_PYTHON), "-m", "venv", str(venv)], cwd=tmp_path)
    _run([str(venv / "bin" / "pip"), "install", "-q", str(wheels[0])], cwd=tmp_path)
    return venv


def test_a_wheel_installed_in_a_fresh_venv_builds_the_image_and_runs_a_session(
    tmp_path: Path, make_server: MakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = _install_wheel(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    python = str(venv / "bin" / "python")
    probe = (
        "import writerpool, writerpool.runtime.image as i; "
        "print(writerpool.__file__); print(i.find_images_dir())"
    )
    package, images = _run([python, "-c", probe], cwd=outside).split()
    site = venv / "lib"
    # Not editable: the code and the image definition are the installed copies.
    assert Path(package).is_relative_to(site) and not Path(package).is_relative_to(SOURCE)
    assert Path(images) == Path(package).parent / "_images"
    for name in ("rootfs.toml", "Containerfile", "pi-launcher"):
        assert (Path(images) / name).read_bytes() == (SOURCE / "images" / name).read_bytes()

    checkout = make_checkout(tmp_path / "checkout", commits=2)
    server = make_server(boxed=checkout)
    built = _wp(venv, outside, "image", "build")
    codes = {f["code"] for f in built["findings"]}
    assert codes & {"image_built", "image_reused"}, built
    _wp(venv, outside, "control", "--apply")
    _wp(venv, outside, "mode", "set", "boxed", "container", "--profiles", "code", "--apply")
    clone = server.paths.writer_dir(WRITER) / "clone"

    monkeypatch.setattr(harness, "SERVE_ARGV", [str(venv / "bin" / "writerpool"), "serve", "-v"])
    code = {"workspace": "boxed", "executionProfile": "code"}

    async def scenario() -> None:
        async with harness.connect(server) as client:
            session = (await client.ok("pi_session_start", code))["session"]
            assert (session["placement"], session["writer"]) == ("container", WRITER)
            sid = session["sessionId"]
            body = await client.ok(
                "pi_session_prompt", {"sessionId": sid, "message": "please-write: from a wheel"}
            )
            turn = await client.wait_turn(sid, body["turnId"], limit=300)
            assert (turn["status"], turn["text"]) == ("completed", WROTE_TEXT)
            await client.ok("pi_session_close", {"sessionId": sid})

    anyio.run(scenario)
    assert (clone / "created.txt").read_text() == "written by pi\n"
    assert writer_containers(WRITER) == []
