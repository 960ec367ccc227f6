"""Claude Code and Codex, the real clients, run the coding session of test_clients.py
through the pool service over HTTP: registered with `register … --http`, each with a
token of its own that writerpool holds and its header helper gives the client."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import KEY_ENV
from tests.e2e.harness import ServerEnv
from tests.e2e.standins import FINAL_TEXT, AnthropicStandIn, ResponsesStandIn, SessionDriver
from tests.e2e.test_clients import (
    PROMPT,
    USER_PROMPT,
    _check_the_story,
    _client_env,
    _codex_config,
    _run,
    coding,  # noqa: F401 - a fixture
)
from tests.integration.test_register_clients import client_bin  # noqa: F401 - a fixture
from tests.integration.writers_support import wp

pytestmark = [
    pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi, pytest.mark.clients,
]  # fmt: skip


@pytest.fixture
def service(
    coding: tuple[ServerEnv, Path],  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[ServerEnv, Path]]:
    """The coding setup, with the provider key where the service (started by register
    --http from this environment) finds it; the service is stopped afterwards."""
    server, _ = coding
    monkeypatch.setenv(KEY_ENV, server.env[KEY_ENV])
    try:
        yield coding
    finally:
        wp("service", "stop", check=True)


def _audited_clients(server: ServerEnv) -> set[str | None]:
    lines = server.audit_lines()
    return {line.get("client") for line in lines if line["action"] == "pi_session_start"}


def test_claude_code_runs_a_coding_session_over_http(
    service: tuple[ServerEnv, Path], tmp_path: Path
) -> None:
    server, checkout = service
    _, done = wp("register", "claude-code:user", "--http", "--apply", check=True)
    assert done["data"]["url"].startswith("http://127.0.0.1:")
    _, status = wp("service", "status", check=True)
    assert status["data"]["url"] == done["data"]["url"]
    driver = SessionDriver("boxed", PROMPT)
    with AnthropicStandIn(driver) as model:
        env = _client_env(
            server,
            ANTHROPIC_BASE_URL=model.base_url,
            ANTHROPIC_API_KEY="sk-ant-stand-in",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        env.pop(KEY_ENV)  # only the service holds the provider key
        argv = ["claude", "-p", USER_PROMPT, "--output-format", "stream-json", "--verbose",
                "--allowedTools", "mcp__writerpool"]  # fmt: skip
        out = _run(argv, env, tmp_path, tmp_path / "claude.log")
        results = model.tool_results()
    last = json.loads(out.strip().splitlines()[-1])
    assert last["type"] == "result" and last["result"] == FINAL_TEXT, last
    _check_the_story(server, checkout, driver, results)
    assert _audited_clients(server) == {"claude-code"}


def test_codex_runs_a_coding_session_over_http(
    service: tuple[ServerEnv, Path], tmp_path: Path
) -> None:
    server, checkout = service
    driver = SessionDriver("boxed", PROMPT)
    with ResponsesStandIn(driver) as model:
        _codex_config(Path(os.environ["HOME"]), model.base_url)
        _, done = wp("register", "codex:user", "--http", "--approve-prompts", "--apply", check=True)
        assert "token" not in done["data"], "the token stays with writerpool"
        # Nothing to set in Codex's environment: its header helper asks writerpool.
        env = _client_env(server)
        env.pop(KEY_ENV)
        argv = ["codex", "exec", "--skip-git-repo-check", "--json", USER_PROMPT]
        out = _run(argv, env, tmp_path, tmp_path / "codex.log")
        results = model.tool_results()
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    messages = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]  # fmt: skip
    assert messages[-1] == FINAL_TEXT
    _check_the_story(server, checkout, driver, results)
    assert _audited_clients(server) == {"codex"}
