"""Claude Code and Codex, the real clients from the npm registry, drive writerpool
through the registration `writerpool register` made: a coding session in a container
workspace, a prompt whose turn takes about 12 s (pi runs three tools in a writer and
commits on a new branch), waits with progress, the result, close; then the operator
collects the writer.

Each client runs non-interactively against a scripted stand-in of its model API on
loopback (tests/e2e/standins.py), pointed at it with the client's own settings, and
otherwise with its defaults plus only what docs/clients.md tells a user to set.
pi in the writer reaches the scripted pi provider the way the `scripted` fixture sets
up (tests/e2e/conftest.py), which is the one place to change that path.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import CLIENT_BRANCH, CLIENT_TEXT, KEY_ENV, MakeServer
from tests.e2e.harness import ServerEnv
from tests.e2e.standins import FINAL_TEXT, AnthropicStandIn, ResponsesStandIn, SessionDriver
from tests.integration.test_register_clients import client_bin  # noqa: F401 - a fixture
from tests.integration.writers_support import git, make_checkout, wp, writer_containers
from writerpool.sessions.contract.arguments import TEXT_PAGE_DEFAULT

pytestmark = [
    pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi, pytest.mark.clients,
]  # fmt: skip

WRITER = "boxed-w1"
PROMPT = "client-commit: make the change on a new branch"
USER_PROMPT = "Use the writerpool tools: start a coding session in workspace boxed and do the work."
CLIENT_SECONDS = 600


def _container_only(server: ServerEnv) -> None:
    """Keep only the container workspace: no coding profile works in a checkout, so a
    prompt is not destructive (the setup docs/clients.md recommends)."""
    text = server.paths.config_file.read_text()
    head, _, rest = text.partition("\n\n")
    kept = [line for line in head.splitlines() if not line.startswith(("demo", "hosted", "locked"))]
    server.paths.config_file.write_text("\n".join(kept) + "\n\n" + rest)
    server.paths.modes_file.unlink(missing_ok=True)  # the host and read-only entries


@pytest.fixture
def coding(
    tmp_path: Path,
    make_server: MakeServer,
    image_pin: Path,
    client_bin: Path,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[ServerEnv, Path]:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    server = make_server(boxed=checkout)
    _container_only(server)
    monkeypatch.setenv("PATH", f"{client_bin}{os.pathsep}{os.environ['PATH']}")
    wp("control", "--apply", check=True)
    wp("mode", "set", "boxed", "container", "--profiles", "code", "--apply", check=True)
    return server, checkout


def _client_env(server: ServerEnv, **extra: str) -> dict[str, str]:
    """The user's environment as a client inherits it: the test's HOME and XDG_*, the
    provider key, and the client's own settings for its model API."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env[KEY_ENV] = server.env[KEY_ENV]
    env.update(extra)
    return env


def _run(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> str:
    done = subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CLIENT_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
    assert done.returncode == 0, f"{argv[0]} exited {done.returncode}; see {log}"
    return done.stdout


def _check_the_story(
    server: ServerEnv, checkout: Path, driver: SessionDriver, results: list[str]
) -> None:
    """What the model saw, what the writer holds, and what collection brings back."""
    bodies = driver.seen
    assert [b["ok"] for b in bodies] == [True] * len(bodies), bodies
    started = bodies[0]["session"]
    assert (started["placement"], started["writer"]) == ("container", WRITER)
    final = next(b for b in bodies if "turn" in b and b["turn"]["status"] != "running")
    turn = final["turn"]
    assert turn["status"] == "completed" and turn["toolCalls"] == 3
    # The default page reached the model whole, and says how to read on.
    assert turn["text"] == CLIENT_TEXT[:TEXT_PAGE_DEFAULT]
    assert (turn["textLength"], turn["nextOffset"], turn["textTruncated"]) == (
        len(CLIENT_TEXT), TEXT_PAGE_DEFAULT, False,
    )  # fmt: skip
    assert any(CLIENT_TEXT[:TEXT_PAGE_DEFAULT] in r.replace("\\n", "\n") for r in results)
    work = final["work"]
    assert work["headBranch"] == CLIENT_BRANCH
    assert [b["name"] for b in work["branchesChanged"]] == [CLIENT_BRANCH]
    assert "collects" in work["note"]
    closed = bodies[-1]["session"]
    assert closed["state"] == "closed"
    assert writer_containers(WRITER) == []
    # Nothing reached the operator's checkout until the operator collects.
    assert git(checkout, "branch", "--list", CLIENT_BRANCH) == ""
    wp("writer", "collect", WRITER, "--apply", check=True)
    collected = git(checkout, "rev-parse", f"refs/remotes/writer-{WRITER}/{CLIENT_BRANCH}")
    assert collected == work["headCommit"]
    assert git(checkout, "show", f"{collected}:change.txt") == "changed by pi"


def test_claude_code_runs_a_coding_session_in_a_writer(
    coding: tuple[ServerEnv, Path], tmp_path: Path
) -> None:
    server, checkout = coding
    wp("register", "claude-code:user", "--apply", check=True)
    driver = SessionDriver("boxed", PROMPT)
    with AnthropicStandIn(driver) as model:
        env = _client_env(
            server,
            ANTHROPIC_BASE_URL=model.base_url,
            ANTHROPIC_API_KEY="sk-ant-stand-in",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        debug = str(tmp_path / "claude-debug.log")
        argv = ["claude", "-p", USER_PROMPT, "--output-format", "stream-json", "--verbose",
                # The one setting docs/clients.md asks for: allow writerpool's tools.
                "--allowedTools", "mcp__writerpool", "--debug-file", debug]  # fmt: skip
        out = _run(argv, env, tmp_path, tmp_path / "claude.log")
        results = model.tool_results()
    last = json.loads(out.strip().splitlines()[-1])
    assert last["type"] == "result" and last["result"] == FINAL_TEXT, last
    _check_the_story(server, checkout, driver, results)


def _codex_config(home: Path, base_url: str) -> None:
    """Only the stand-in model provider; everything else is Codex's default."""
    path = home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    own = path.read_text() if path.exists() else ""
    path.write_text(
        'model = "stand-in"\nmodel_provider = "standin"\n\n'
        f'[model_providers.standin]\nname = "stand-in"\nbase_url = "{base_url}/v1"\n'
        'wire_api = "responses"\n\n' + own
    )


def test_codex_runs_a_coding_session_in_a_writer(
    coding: tuple[ServerEnv, Path], tmp_path: Path
) -> None:
    server, checkout = coding
    driver = SessionDriver("boxed", PROMPT)
    with ResponsesStandIn(driver) as model:
        _codex_config(Path(os.environ["HOME"]), model.base_url)
        # Without the choice, the plan says why prompts would ask (and be refused here).
        _, plan = wp("register", "codex:user")
        [note] = [f for f in plan["findings"] if f["code"] == "prompt_approval"]
        assert "refused under `codex exec`" in note["message"] and note["remedy"], note
        # The explicit choice: pi_session_prompt approved, so `codex exec` can prompt.
        _, done = wp("register", "codex:user", "--approve-prompts", "--apply", check=True)
        [note] = [f for f in done["findings"] if f["code"] == "prompt_approval"]
        assert "without asking" in note["message"], note
        code, _ = wp("register", "codex:user", "--approve-prompts", "--verify")
        assert code == 0
        env = _client_env(server)
        argv = ["codex", "exec", "--skip-git-repo-check", "--json", USER_PROMPT]
        out = _run(argv, env, tmp_path, tmp_path / "codex.log")
        results = model.tool_results()
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    calls = [e["item"] for e in events if e.get("type") == "item.completed"
             and e["item"].get("type") == "mcp_tool_call"]  # fmt: skip
    assert [c["tool"] for c in calls][:2] == ["pi_session_start", "pi_session_prompt"], calls
    assert all(c["error"] is None for c in calls), calls
    messages = [e["item"]["text"] for e in events if e.get("type") == "item.completed"
                and e["item"].get("type") == "agent_message"]  # fmt: skip
    assert messages[-1] == FINAL_TEXT
    _check_the_story(server, checkout, driver, results)


def transcript_of(log: Path) -> list[dict[str, Any]]:
    """JSON lines of a client's output (kept beside the test for reading)."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
