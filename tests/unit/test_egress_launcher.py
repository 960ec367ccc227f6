"""The launcher runs pi under the egress forwarder (which stays PID 1 and starts pi as
its child) when, and only when, both egress variables are set; otherwise pi alone. The
forwarder's own failure is the launch's. The launcher's text runs under the real `sh`,
its /opt and /usr paths moved under tmp_path."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from tests.unit.test_pi_launcher import NOT_AS_ROOT, fake_node, fake_pi_manifest
from writerpool.agent.project_files import PROJECT_DIR
from writerpool.runtime.image import DEFAULT_IMAGES_DIR

LAUNCHER = DEFAULT_IMAGES_DIR / "pi-launcher"
pytestmark = NOT_AS_ROOT


def fake(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def launch(
    root: Path, env: dict[str, str], python_exit: int = 0
) -> subprocess.CompletedProcess[str]:
    log = root / "log"  # what the fake python3 (the forwarder) was asked to run
    fake_node(root / "opt/pi/bin/node", 0o111)  # prints its arguments on stdout
    fake(root / "usr/bin/python3", f'echo "python3 $*" >> {log}; exit {python_exit}')
    fake_pi_manifest(root, PROJECT_DIR)
    text = LAUNCHER.read_text().replace("/opt/", f"{root}/opt/").replace("/usr/", f"{root}/usr/")
    script = root / "pi"
    script.write_text(text)
    return subprocess.run(
        ["sh", str(script), "--mode", "rpc"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=30,
    )


def test_with_both_variables_pi_runs_under_the_forwarder(tmp_path: Path) -> None:
    env = {"WRITERPOOL_EGRESS_PORT": "18080", "WRITERPOOL_EGRESS_SOCKET": "/pi/egress.sock"}
    done = launch(tmp_path, env)
    assert done.returncode == 0, done.stderr
    cli = f"{tmp_path}/opt/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
    assert (tmp_path / "log").read_text().splitlines() == [
        f"python3 -I -S {tmp_path}/usr/local/lib/writerpool/egress-forwarder --supervise "
        f"{tmp_path}/opt/pi/bin/node {cli} --mode rpc",
    ]
    assert done.stdout == ""  # pi is the forwarder's to start


def test_without_them_pi_starts_alone(tmp_path: Path) -> None:
    cli = f"{tmp_path}/opt/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
    for env in ({}, {"WRITERPOOL_EGRESS_PORT": "18080"}, {"WRITERPOOL_EGRESS_SOCKET": "/s"}):
        (tmp_path / "log").unlink(missing_ok=True)
        done = launch(tmp_path, env)
        assert done.returncode == 0
        assert done.stdout == f"{cli} --mode rpc\n"
        assert not (tmp_path / "log").exists()


def test_a_forwarder_that_fails_fails_the_launch(tmp_path: Path) -> None:
    env = {"WRITERPOOL_EGRESS_PORT": "18080", "WRITERPOOL_EGRESS_SOCKET": "/pi/egress.sock"}
    done = launch(tmp_path, env, python_exit=125)
    assert done.returncode == 125
    assert done.stdout == ""
