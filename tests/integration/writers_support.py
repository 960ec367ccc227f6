"""Helpers for tests that drive writerpool as an operator would."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli

PROFILES = """
[profiles.review]
permission = "read-only"
provider = "scripted"
model = "scripted-model"
default = true

[profiles.code]
permission = "coding"
provider = "scripted"
model = "scripted-model"

[providers.scripted]
base_url = "http://127.0.0.1:9/v1"

[pool]
lease_wait_seconds = {wait}
"""


def config_text(workspaces: dict[str, Path], wait: float = 1.0) -> str:
    """config.toml with these workspaces and the scripted read-only and coding profiles."""
    lines = ["[workspaces]"] + [f'{alias} = "{repo}"' for alias, repo in workspaces.items()]
    return "\n".join(lines) + "\n" + PROFILES.format(wait=wait)


def write_workspaces(workspaces: dict[str, Path], wait: float = 1.0) -> Path:
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(config_text(workspaces, wait))
    return config


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def make_checkout(path: Path, commits: int = 3, origin: str | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i in range(commits):
        (path / f"file{i}.txt").write_text(f"content {i}\n")
        git(path, "add", ".")
        git(path, "commit", "-q", "-m", f"commit {i}")
    if origin:
        git(path, "remote", "add", "origin", origin)
    return path


def write_config(repo: Path, wait: float = 1.0) -> Path:
    return write_workspaces({"demo": repo}, wait)


def wp(*args: str, check: bool = False) -> tuple[int, dict[str, Any]]:
    """Run the writerpool CLI with --json in this process, as `python -m writerpool` runs
    it (tests/support/cli.py); return (exit code, report)."""
    code, report, _ = wp_err(*args, check=check)
    return code, report


def wp_err(*args: str, check: bool = False) -> tuple[int, dict[str, Any], str]:
    """wp, with what the command said on stderr."""
    done = run_cli(*args, "--json")
    try:
        report = json.loads(done.out)
    except ValueError as exc:
        message = f"not JSON (exit {done.code}): {done.out}\n{done.err}"
        raise AssertionError(message) from exc
    if check and done.code != 0:
        raise AssertionError(f"exit {done.code}: {done.out}\n{done.err}")
    return done.code, report, done.err


def codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for f in report["findings"]]


def snapshot_tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under root with its size and mode (for before/after)."""
    out: dict[str, tuple[int, int]] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (st.st_size, st.st_mode)
    return out


def podman(*args: str) -> str:
    """Podman as the operator account (its real home, not the test's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "XDG_DATA_HOME")}
    env["HOME"] = pwd.getpwuid(os.getuid()).pw_dir
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def writer_containers(name: str) -> list[str]:
    out = podman(
        "ps", "-a", "--filter", f"label=io.writerpool.writer={name}", "--format", "{{.Names}}"
    )
    return out.split()
