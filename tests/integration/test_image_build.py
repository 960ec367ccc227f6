"""`writerpool image build` for real: rootless Podman, mmdebstrap, the pinned pi.

The writer image is left in the account's storage (other tests and the operator use it);
anything else a test builds is removed by the test.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REAL_PATHS, REQUIRE
from tests.support.images import remove_images
from writerpool.agent import native
from writerpool.agent.compact import install_preload, node_options
from writerpool.agent.compile_cache import make_compile_cache
from writerpool.agent.install import (
    PI_VERSION,
    install_pi,
    installed_version,
    pi_installed,
    reach_problem,
)
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.proc import Completed, run
from writerpool.runtime.image import DEFAULT_IMAGES_DIR, load_definition, load_pin, resolve_image
from writerpool.runtime.image_build import PiSource, Progress, build_image, run_tool
from writerpool.runtime.image_uv import UV_VERSION
from writerpool.runtime.podman import podman_env

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.timeout(2400)]

BUILD_TIMEOUT = 2400


@pytest.fixture(autouse=True)
def _tools() -> None:
    missing = [t for t in ("podman", "mmdebstrap") if shutil.which(t) is None]
    if missing:
        if REQUIRE:
            pytest.fail(f"missing tools: {', '.join(missing)}")
        pytest.skip(f"missing tools: {', '.join(missing)}")


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    done = run([sys.executable, "-m", "writerpool", *args, "--json"], env=dict(os.environ),
               timeout=BUILD_TIMEOUT, check=False)  # fmt: skip
    assert done.stdout, done.stderr[-3000:]
    return done.returncode, json.loads(done.out)


def _podman(*args: str, timeout: float = 120) -> Completed:
    return run(["podman", *args], env=podman_env(), timeout=timeout, check=False)


def _build_twice() -> tuple[dict[str, Any], dict[str, Any]]:
    first_rc, first = _cli("image", "build")
    assert first_rc == 0, first
    second_rc, second = _cli("image", "build")
    assert second_rc == 0, second
    return first, second


def test_rebuild_with_nothing_changed_reuses_the_image_and_pins_it() -> None:
    first, second = _build_twice()
    assert first["findings"][0]["code"] in ("image_built", "image_reused")
    assert second["findings"][0]["code"] == "image_reused"
    image_id = second["data"]["imageId"]
    assert image_id == first["data"]["imageId"]
    pin = load_pin(Paths.from_env())
    assert pin is not None and pin.image_id == image_id
    assert pin.inputs_digest == second["data"]["inputsDigest"]
    assert resolve_image(Paths.from_env(), "default") == image_id

    show_rc, show = _cli("image", "show")
    assert show_rc == 0, show
    assert show["findings"][0]["code"] == "image_pinned"
    assert show["data"]["exists"] is True
    assert show["data"]["agents"] == {"pi": PI_VERSION, **native.versions()}

    labels = json.loads(_podman("image", "inspect", "--format", "{{json .Labels}}", image_id).out)
    assert labels["io.writerpool.inputs"] == pin.inputs_digest
    assert labels["io.writerpool.version"] == pin.writerpool_version


def test_image_holds_node_git_search_tools_python_pip_venv_uv_and_pi() -> None:
    _, second = _build_twice()
    image_id = second["data"]["imageId"]
    script = (
        "node --version; git --version; rg --version | head -n 1; fdfind --version; "
        "python3 -c 'import json, sys; print(sys.version_info[:2])'; pi --version 2>&1; "
        "python3 -m pip --version | cut -d' ' -f1; python3 -m venv --without-pip /tmp/v && "
        "/tmp/v/bin/python -c 'import sys; print(sys.prefix)'; uv --version"
    )
    # As the account's own uid, like a writer: pi refuses to run where it could read its
    # execute-only Node.js (root could).
    done = _podman("run", "--rm", "--network", "none", "--userns=keep-id", image_id,
                   "sh", "-ec", script)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.out.splitlines()
    major, minor = (int(p) for p in lines[0].removeprefix("v").split(".")[:2])
    assert (major, minor) >= (20, 6)
    assert lines[1].startswith("git version ")
    assert lines[2].startswith("ripgrep ")
    assert lines[3].startswith("fdfind ")
    assert lines[4].startswith("(3, ")
    assert lines[5].strip() == PI_VERSION
    assert lines[6:8] == ["pip", "/tmp/v"]
    assert lines[8].startswith(f"uv {UV_VERSION}")


def test_image_runs_claude_code_and_codex_offline_without_codex_voice() -> None:
    _, second = _build_twice()
    script = (
        "claude --version; codex --version; readlink /usr/local/bin/codex; "
        "test -e /opt/codex/codex-resources/voice && echo voice || echo no-voice"
    )
    done = _podman("run", "--rm", "--network", "none", "--userns=keep-id", "--read-only",
                   "--tmpfs", "/tmp", "--env", "HOME=/tmp", second["data"]["imageId"],
                   "sh", "-ec", script)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.out.splitlines() == [
        f"{native.CLAUDE_VERSION} (Claude Code)", f"codex-cli {native.CODEX_VERSION}",
        "/opt/codex/bin/codex", "no-voice",
    ]  # fmt: skip


def test_the_images_pi_starts_from_a_compile_cache_it_cannot_change() -> None:
    _, second = _build_twice()
    image_id = second["data"]["imageId"]
    # Node logs each module whose compiled code it took from the cache.
    started = _podman("run", "--rm", "--network", "none", "--userns=keep-id", "--env",
                      "NODE_DEBUG_NATIVE=COMPILE_CACHE", image_id, "pi", "--version")  # fmt: skip
    log = started.stderr.decode(errors="replace")
    assert started.returncode == 0, log[-2000:]
    assert PI_VERSION in log.splitlines()  # pi prints its version on stderr
    assert log.count("was accepted") > 100, log[-2000:]
    assert "permission denied" not in log
    # Not even on a writable root file system can the writer's uid change an entry.
    script = (
        "find /opt/pi/compile-cache -type f | wc -l; "
        "find /opt/pi/compile-cache -writable | wc -l; "
        "touch /opt/pi/compile-cache/x 2>/dev/null && echo wrote || echo refused"
    )
    done = _podman("run", "--rm", "--network", "none", "--userns=keep-id", image_id,
                   "sh", "-c", script)  # fmt: skip
    files, writable, touched = done.out.split()
    assert int(files) > 100 and int(writable) == 0 and touched == "refused"


def test_pis_preload_hides_the_compile_cache_from_what_pi_runs(tmp_path: Path) -> None:
    _, second = _build_twice()
    install_preload(tmp_path)
    tmp_path.chmod(0o755)
    # The environment pi-launcher gives pi; the preload runs first in pi's Node.js.
    show = "console.log([process.env.NODE_COMPILE_CACHE, process.env.NODE_OPTIONS].join())"
    done = _podman(
        "run", "--rm", "--network", "none", "--userns=keep-id",
        "--mount", f"type=bind,src={tmp_path},dst=/p,ro=true",
        "--env", "NODE_COMPILE_CACHE=/opt/pi/compile-cache",
        "--env", "NODE_COMPILE_CACHE_PORTABLE=1",
        "--env", f"NODE_OPTIONS={node_options('/p')}", second["data"]["imageId"],
        "node", "-e", f"{show}; require('child_process').execFileSync('env', {{stdio: 'inherit'}})",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.out.splitlines()
    assert lines[0] == ","
    assert not [ln for ln in lines[1:] if ln.startswith(("NODE_COMPILE_CACHE", "NODE_OPTIONS"))]


def test_a_change_to_the_pi_layer_only_reuses_the_root_file_system(tmp_path: Path) -> None:
    _, second = _build_twice()  # makes sure the root file system was imported
    images = Path(shutil.copytree(DEFAULT_IMAGES_DIR, tmp_path / "images"))
    containerfile = images / "Containerfile"
    containerfile.write_text(containerfile.read_text() + 'LABEL io.writerpool.test="1"\n')
    definition = load_definition(PI_VERSION, images, writerpool_version="0.0.0-test")
    # pi installed for the operator is read, never written; elsewhere install it here.
    real = REAL_PATHS.pi_prefix
    prefix = real if installed_version(real) == PI_VERSION else tmp_path / "pi"
    progress = Progress(None, verbose=False)

    def pi_prefix() -> Path:
        install_pi(prefix)
        make_compile_cache(prefix)
        return prefix

    agents_prefix = REAL_PATHS.agents_prefix
    if not native.installed(agents_prefix):
        agents_prefix = tmp_path / "agents"

    def agents(context: Path) -> Path:
        native.install(agents_prefix)
        return native.stage(agents_prefix, context)

    pi = PiSource(lambda: pi_installed(prefix), reach_problem, pi_prefix, agents)
    try:
        outcome = build_image(Paths.from_env(), definition, pi, progress)
        assert not outcome.reused and outcome.rootfs == "image"
        assert outcome.image_id != second["data"]["imageId"]

        def layers(image_id: str) -> list[str]:
            raw = _podman("image", "inspect", "--format", "{{json .RootFS.Layers}}", image_id)
            return list(json.loads(raw.out))

        # Built on the imported root file system, not on top of the other writer image.
        assert len(layers(outcome.image_id)) == len(layers(second["data"]["imageId"]))
        again = build_image(Paths.from_env(), definition, pi, progress)
        assert again.reused and again.image_id == outcome.image_id
    finally:
        remove_images(definition.tag)


@pytest.mark.parametrize("image_id", ["0" * 64])
def test_resolving_an_absent_image_is_image_unavailable(image_id: str) -> None:
    with pytest.raises(WriterpoolError) as info:
        resolve_image(Paths.from_env(), image_id)
    assert info.value.code == "image_unavailable"


def test_a_failing_tool_reports_its_last_line_without_paths() -> None:
    progress = Progress(None, verbose=False)
    script = "echo working; echo 'E: cannot open /var/lib/x' >&2; echo 'E: later' >&2; exit 3"
    argv = ["sh", "-c", script]
    with pytest.raises(WriterpoolError) as info:
        run_tool(argv, env={"PATH": "/usr/bin:/bin"}, timeout=30, progress=progress, what="tool")
    assert info.value.code == "image_build_failed"
    assert "exited 3" in info.value.message and "E: cannot open" in info.value.message
    assert "/var/lib" not in info.value.message and "later" not in info.value.message


def test_a_tool_past_its_timeout_is_stopped() -> None:
    progress = Progress(None, verbose=False)
    with pytest.raises(WriterpoolError) as info:
        run_tool(["sleep", "30"], env={"PATH": "/usr/bin:/bin"}, timeout=1, progress=progress,
                 what="sleep")  # fmt: skip
    assert "timed out" in info.value.message


def test_a_committed_derivative_carrying_the_labels_is_not_reused() -> None:
    _, built = _build_twice()
    image_id = built["data"]["imageId"]
    name = "wp-test-image-derivative"
    _podman("rm", "-f", name)
    assert _podman("run", "--name", name, "--network", "none", image_id, "true").returncode == 0
    try:
        derived = _podman("commit", "-q", name).out.strip().removeprefix("sha256:")
    finally:
        _podman("rm", "-f", name)
    try:
        labels = json.loads(_podman("image", "inspect", "--format", "{{json .Labels}}",
                                    derived).out)  # fmt: skip
        assert labels["io.writerpool.inputs"] == built["data"]["inputsDigest"]
        rc, again = _cli("image", "build")
        assert rc == 0 and again["findings"][0]["code"] == "image_reused"
        assert again["data"]["imageId"] == image_id
    finally:
        remove_images(derived)
    # removing the derivative left the writer image (its tagged parent) in place
    assert _podman("image", "exists", image_id).returncode == 0
