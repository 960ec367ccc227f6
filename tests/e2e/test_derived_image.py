"""The offline path to a project's tests: `image derive` from a requirements file (the
wheel made in the test, pip kept off every index), `mode set --image NAME`, then a real
session through a real MCP client in which pi runs the project's suite on the default
provider network: no allowlist, nothing installed at run time."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.conftest import KEY_ENV, SERVER_ENV_VARS
from tests.e2e.harness import ServerEnv, connect
from tests.e2e.pool_support import _config_text, result_value, unique_alias
from tests.integration.writers_support import codes, wp
from tests.support.images import remove_images
from tests.support.wheels import find_links_env, make_project, make_wheel, requirements_for
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

SUITE = (
    "python3 -m unittest -v 2>&1 | tail -n 3; echo suite-exit=${PIPESTATUS[0]}; "
    "echo python=$(command -v python3); "
    "pip install -q --retries 0 --timeout 5 --index-url https://index.test/simple attrs "
    ">/dev/null 2>&1; echo install-exit=$?; "
    "touch /opt/venv/planted 2>/dev/null; echo plant-exit=$?"
)
SCRIPT = Script(
    scripts=[
        ScriptEntry(
            match="run-the-suite",
            steps=[
                Step(tool_calls=[ToolCall(name="bash", arguments={"command": SUITE})]),
                Step(text="{tool_results}"),
            ],
        )
    ],
    default=[Step(text="nothing scripted")],
)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT) as scripted:
        yield scripted


def test_a_session_on_a_derived_image_runs_the_projects_suite_offline(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alias = unique_alias("drv")
    name = f"deps{secrets.token_hex(3)}"
    for key, value in find_links_env(make_wheel(tmp_path / "wheels").parent).items():
        monkeypatch.setenv(key, value)  # the operator's pip settings: no index, these wheels
    checkout = make_project(tmp_path / "checkout")
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(_config_text(alias, checkout, provider.port))
    code, derived = wp("image", "derive", name, "--requirements",
                       str(requirements_for(tmp_path / "requirements.txt")))  # fmt: skip
    assert code == 0, derived
    image_id = derived["data"]["imageId"]
    try:
        wp("control", "--apply", check=True)
        code, applied = wp("mode", "set", alias, "container", "--profiles", "code",
                           "--image", name, "--apply")  # fmt: skip
        assert code == 0 and "writer_accepted" in codes(applied), applied
        entry = load_modes(paths).workspaces[alias].container
        assert entry is not None and entry.image == image_id, "the name is stored as its ID"
        state = load_state(paths.writer_dir(f"{alias}-w1"))
        assert state is not None and state.image == image_id and state.network == "provider"

        key = "sk-scripted-" + secrets.token_hex(12)
        env = {k: os.environ[k] for k in SERVER_ENV_VARS if k in os.environ}
        env[KEY_ENV] = key
        server = ServerEnv(tmp_path, env, paths, {alias: checkout}, secrets=[key])

        async def scenario() -> dict[str, str]:
            async with connect(server) as client:
                start = {"workspace": alias, "executionProfile": "code"}
                sid = (await client.ok("pi_session_start", start))["session"]["sessionId"]
                prompt = {"sessionId": sid, "message": "run-the-suite now"}
                body = await client.ok("pi_session_prompt", prompt)
                turn = await client.wait_turn(sid, body["turnId"], limit=300)
                await client.ok("pi_session_close", {"sessionId": sid})
                return turn

        turn = anyio.run(scenario)
        assert turn["status"] == "completed", turn
        text = turn["text"]
        assert "Ran 2 tests" in text and "\nOK" in text, text
        assert result_value(text, "suite-exit") == "0"
        assert result_value(text, "python") == "/opt/venv/bin/python3"
        # Nothing can be installed at run time: no index is reachable, the venv is read-only.
        assert result_value(text, "install-exit") != "0"
        assert result_value(text, "plant-exit") != "0"
    finally:
        remove_images(image_id)
