"""pi, the coding agent: one pinned version, installed from the npm registry."""

from __future__ import annotations

import json
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, clean_env, run

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"


def pi_entry(prefix: Path) -> Path:
    """The pi launcher inside an npm prefix."""
    return prefix / "node_modules" / ".bin" / "pi"


def installed_version(prefix: Path) -> str | None:
    manifest = prefix / "node_modules" / PI_PACKAGE / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def install_pi(prefix: Path) -> Path:
    """Install the pinned pi into prefix unless it is already there; return its launcher."""
    if installed_version(prefix) == PI_VERSION and pi_entry(prefix).exists():
        return pi_entry(prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    argv = [
        "npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
        "--omit=dev", "--ignore-scripts", f"{PI_PACKAGE}@{PI_VERSION}",
    ]  # fmt: skip
    try:
        run(argv, env=clean_env(), timeout=900)
    except CommandFailed as exc:
        raise WriterpoolError("session_start_failed", "installing pi with npm failed") from exc
    return pi_entry(prefix)
