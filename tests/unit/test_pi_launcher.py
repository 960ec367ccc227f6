"""The writer image's pi launcher: it runs pi only on the execute-only Node.js build
copied into the image (so pi is not dumpable), and refuses anything else. The
launcher's text runs under the real `sh`, with its /opt and /usr paths moved under
tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from writerpool.agent.install import NODE_VERSION
from writerpool.agent.project_files import PROJECT_DIR
from writerpool.runtime.image import DEFAULT_IMAGES_DIR

LAUNCHER = DEFAULT_IMAGES_DIR / "pi-launcher"


def fake_node(path: Path, mode: int) -> None:
    """A real executable that prints its arguments (`echo`), with `mode`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    shutil.copyfile(shutil.which("echo") or "/bin/echo", path)
    path.chmod(mode)


def fake_pi_manifest(root: Path, config_dir: str) -> None:
    manifest = root / "opt/pi/node_modules/@mariozechner/pi-coding-agent/package.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"name": "pi", "piConfig": {"configDir": config_dir}}))


def run_launcher(root: Path, config_dir: str = PROJECT_DIR) -> subprocess.CompletedProcess[str]:
    fake_pi_manifest(root, config_dir)
    text = LAUNCHER.read_text().replace("/opt/", f"{root}/opt/").replace("/usr/", f"{root}/usr/")
    script = root / "pi"
    script.write_text(text)
    return subprocess.run(["sh", str(script), "--version"], capture_output=True, text=True)


def test_the_launcher_names_the_pinned_node_version() -> None:
    # Bumping NODE_VERSION without the launcher would leave the image's inputs unchanged.
    assert f"Node.js {NODE_VERSION} build" in LAUNCHER.read_text()


# Root reads every file, so for root no Node.js is execute-only: the launcher refuses.
NOT_AS_ROOT = pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")


@NOT_AS_ROOT
def test_pi_runs_on_the_execute_only_node(tmp_path: Path) -> None:
    fake_node(tmp_path / "opt/pi/bin/node", 0o111)
    done = run_launcher(tmp_path)
    assert done.returncode == 0, done.stderr
    cli = f"{tmp_path}/opt/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
    assert done.stdout == f"{cli} --version\n"


def test_a_readable_node_is_refused(tmp_path: Path) -> None:
    fake_node(tmp_path / "opt/pi/bin/node", 0o755)
    fake_node(tmp_path / "usr/bin/node", 0o755)
    done = run_launcher(tmp_path)
    assert done.returncode == 127 and done.stdout == ""
    assert "execute-only Node.js" in done.stderr


def test_no_node_at_all_is_a_clear_failure(tmp_path: Path) -> None:
    done = run_launcher(tmp_path)
    assert done.returncode == 127
    assert "execute-only Node.js" in done.stderr


def test_a_pi_that_would_read_project_files_is_refused(tmp_path: Path) -> None:
    fake_node(tmp_path / "opt/pi/bin/node", 0o111)
    done = run_launcher(tmp_path, config_dir=".pi")
    assert done.returncode == 126
    assert done.stdout == ""
    assert "per-project files" in done.stderr
