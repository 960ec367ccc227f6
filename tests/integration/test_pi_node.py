"""pi's Node.js: the pinned official build that install_pi puts beside pi (with V8's
startup snapshot, which Debian's nodejs lacks), and the writer image running pi on it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import REAL_PATHS, REQUIRE
from writerpool.agent.install import NODE_VERSION, PI_VERSION, bundled_node, install_pi
from writerpool.runtime.image import load_pin
from writerpool.runtime.podman import podman_env


def _missing(reason: str) -> None:
    if REQUIRE:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.pi
def test_install_pi_puts_the_pinned_node_with_its_startup_snapshot_beside_pi() -> None:
    if shutil.which("npm") is None:
        _missing("npm is not installed")
    prefix = REAL_PATHS.pi_prefix  # installed once for the account, as the image build does
    pi = install_pi(prefix)
    node = bundled_node(prefix)
    if node is None:
        pytest.skip("no official Node.js build for this machine; Debian's node runs pi")
    probe = (
        "const v = process.config.variables; console.log(process.version, v.node_use_node_snapshot)"
    )
    done = subprocess.run([str(node), "-e", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [f"v{NODE_VERSION}", "true"]
    version = subprocess.run([str(node), str(pi.resolve()), "--version"], capture_output=True,
                             text=True, check=True)  # fmt: skip
    assert (version.stdout + version.stderr).strip() == PI_VERSION  # pi prints it on stderr


@pytest.mark.podman
@pytest.mark.image
def test_the_writer_image_runs_pi_on_the_bundled_node() -> None:
    pin = load_pin(REAL_PATHS)
    if pin is None:
        _missing("the writer image is not built (run `writerpool image build`)")
    assert pin is not None
    done = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", pin.image_id,
         "sh", "-x", "/usr/local/bin/pi", "--version"],
        capture_output=True, text=True, env=podman_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert PI_VERSION in (done.stdout + done.stderr).splitlines()
    traced = [line for line in done.stderr.splitlines() if line.startswith("+ exec ")]
    assert len(traced) == 1 and traced[0].startswith("+ exec /opt/pi/node_modules/node-linux-")
