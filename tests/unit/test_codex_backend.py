"""Codex's backend: its config.toml holds no key, and its turns run through the real
driver (payload/codex_turns.py) and CodexAgent, one process of a stand-in `codex` per
turn. The stand-in prints recorded `codex exec --json` lines and records its argv, its
environment's token and the prompt it read; the point here is the process handling."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from writerpool.agent.backends import (
    backend_for,
    holds_credential,
    remove_credentials,
    warm_backend_for,
)
from writerpool.agent.codex import CODEX, DRIVER_SOURCE, TURN_EXITED_ERROR, CodexAgent
from writerpool.agent.events import ANSWER_ERROR, Usage
from writerpool.config.models import Config, parse_config
from writerpool.config.providers import resolve_provider
from writerpool.errors import WriterpoolError
from writerpool.pool.modes.request import check_warm

CONFIG = """
[workspaces]
demo = "/srv/demo"
[providers.p]
base_url = "http://model.test/v1"
container_base_url = "http://model.test:8080/v1"
api = "openai-responses"
[providers.chat]
base_url = "http://chat.test/v1"
[profiles.review]
permission = "read-only"
provider = "p"
model = "m"
default = true
[profiles.codex]
permission = "coding"
agent = "codex"
provider = "p"
model = "gpt-test"
thinking = "high"
[profiles.chatty]
permission = "coding"
agent = "codex"
provider = "chat"
model = "m"
"""
TOKEN = "wpt-session-token"
THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"

# Prints what `codex exec --json` 0.171 printed (docs/agents.md), as the prompt asks:
# "hang" waits for a signal, "stubborn" outlives SIGINT, "fail" ends in turn.failed,
# "quit" exits mid-turn.
STAND_IN = """\
import json, os, signal, sys, time
prompt = sys.stdin.read()
argv = sys.argv[1:]
resumed = argv[argv.index("resume") + 1] if "resume" in argv else None
record = {"argv": argv, "prompt": prompt, "pid": os.getpid(),
          "token": os.environ.get("WRITERPOOL_SESSION_TOKEN"),
          "config": os.path.exists(os.path.join(os.environ["CODEX_HOME"], "config.toml"))
                    and os.environ["CODEX_HOME"]}
def say(event):
    print(json.dumps(event), flush=True)
def interrupted(signum, frame):
    with open(os.environ["RECORD"] + ".signals", "a") as f:
        f.write(f"{signum}\\n")
    if prompt != "stubborn":
        sys.exit(130)
signal.signal(signal.SIGINT, interrupted)
say({"type": "thread.started", "thread_id": resumed or "THREAD"})
say({"type": "turn.started"})
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps(record) + "\\n")
if prompt in ("hang", "stubborn"):
    say({"type": "item.started", "item": {"id": "i0", "type": "command_execution",
         "command": "/bin/sh -lc 'sleep 600'"}})
    time.sleep(600)
if prompt == "quit":
    sys.exit(0)
if prompt == "fail":
    say({"type": "turn.failed", "error": {"message": "401 from the provider"}})
    sys.exit(1)
say({"type": "item.started", "item": {"id": "i1", "type": "command_execution",
     "command": "/bin/sh -lc 'git commit -qam x'"}})
say({"type": "item.completed", "item": {"id": "i2", "type": "agent_message",
     "text": "done: " + prompt}})
say({"type": "turn.completed", "usage": {"input_tokens": 40, "output_tokens": 9}})
""".replace("THREAD", THREAD)


@pytest.fixture
def config() -> Config:
    return parse_config(CONFIG.encode())


@pytest.fixture
def agent_dir(tmp_path: Path, config: Config) -> Path:
    agent_dir = tmp_path / "agent"
    CODEX.render(config, agent_dir, "p", True)
    resolved = resolve_provider(config, "p")
    assert resolved is not None
    CODEX.point_at_proxy(agent_dir, resolved, "http://127.0.0.1:41480/v1", TOKEN)
    return agent_dir


class Run:
    """One session's driver and agent on this machine, with the stand-in on PATH."""

    def __init__(self, tmp_path: Path, config: Config, agent_dir: Path, codex: bool = True):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        if codex:
            stand_in = bin_dir / "codex"
            stand_in.write_text(f"#!{sys.executable}\n{STAND_IN}")
            stand_in.chmod(0o755)
        self.record = tmp_path / "record.jsonl"
        self.argv = CODEX.container_command(
            config.profiles["codex"], False, agent_dir, str(tmp_path / "session")
        )
        # The abort's grace before SIGKILL, injected: the driver's argument before "--".
        self.argv[self.argv.index("--") - 1] = "0.5"
        self.home = tmp_path / "agent-home"
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(self.record),
               "HOME": str(self.home)}  # fmt: skip
        self.agent = CODEX.start(self.argv, env, tmp_path, 30.0)

    def turns(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def started(self, count: int) -> dict[str, Any]:
        """The record of the count-th process, once it wrote it (bounded wait)."""
        deadline = time.monotonic() + 30.0
        while len(self.turns()) < count:
            assert time.monotonic() < deadline, "the stand-in never started"
            time.sleep(0.02)
        return self.turns()[count - 1]


@pytest.fixture
def run(tmp_path: Path, config: Config, agent_dir: Path) -> Iterator[Run]:
    started = Run(tmp_path, config, agent_dir)
    yield started
    started.agent.close(10.0)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_config_points_at_the_endpoint_and_the_key_is_a_private_file(
    tmp_path: Path, config: Config
) -> None:
    agent_dir = tmp_path / "agent"
    CODEX.render(config, agent_dir, "p", True)
    assert not holds_credential(agent_dir)
    rendered = tomllib.loads((agent_dir / "codex" / "config.toml").read_text())
    provider = rendered["model_providers"][rendered["model_provider"]]
    assert provider["base_url"] == "http://model.test:8080/v1"  # the container's URL
    assert provider["wire_api"] == "responses"
    assert rendered["sandbox_mode"] == "workspace-write"
    assert rendered["sandbox_workspace_write"] == {
        "writable_roots": ["/work/.git"], "network_access": True,
    }  # fmt: skip
    assert rendered["approval_policy"] == "never"
    assert rendered["analytics"] == {"enabled": False}
    # The driver, rendered again as it is, is not rewritten; one changed is.
    driver = agent_dir / "codex" / "codex_turns.py"
    first = driver.stat()
    CODEX.render(config, agent_dir, "p", True)
    assert (driver.stat().st_ino, driver.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    driver.write_text("tampered")
    CODEX.render(config, agent_dir, "p", True)
    assert driver.read_bytes() == DRIVER_SOURCE.read_bytes()
    assert stat.S_IMODE(driver.stat().st_mode) == 0o644
    resolved = resolve_provider(config, "p")
    assert resolved is not None
    CODEX.point_at_proxy(agent_dir, resolved, "http://127.0.0.1:41480/v1", TOKEN)
    text = (agent_dir / "codex" / "config.toml").read_text()
    assert TOKEN not in text
    proxied = tomllib.loads(text)["model_providers"]["writerpool"]
    assert proxied["base_url"] == "http://127.0.0.1:41480/v1"
    assert proxied["env_key"] == "WRITERPOOL_SESSION_TOKEN"
    key = agent_dir / "codex" / "key"
    assert key.read_text() == TOKEN and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert holds_credential(agent_dir)
    remove_credentials(agent_dir)
    assert not key.exists() and not holds_credential(agent_dir)
    CODEX.install_credential(agent_dir, "p", "sk-real-key")  # an open network's way
    assert key.read_text() == "sk-real-key"


def test_a_provider_codex_cannot_speak_is_refused(tmp_path: Path, config: Config) -> None:
    with pytest.raises(WriterpoolError) as caught:
        CODEX.render(config, tmp_path / "agent", "chat", True)
    assert caught.value.code == "agent_provider_unsupported"
    assert not (tmp_path / "agent" / "codex" / "config.toml").exists()


def test_codex_is_registered_and_never_warmed(config: Config) -> None:
    assert backend_for("codex") is CODEX and not CODEX.can_warm
    assert warm_backend_for("codex") is None
    with pytest.raises(WriterpoolError) as caught:
        check_warm(config, ("codex",), 1)
    assert caught.value.code == "warm_agent_unsupported"


def test_the_argv_holds_no_prompt_model_flags_and_no_pi_variables(config: Config) -> None:
    argv = CODEX.container_command(config.profiles["codex"], False, "/pi/agent", "/tmp/s")
    assert argv[:5] == ["env", "-u", "NODE_OPTIONS", "-u", "PI_CODING_AGENT_DIR"]
    assert not any(arg.startswith("CODEX_HOME=") for arg in argv)  # $HOME/.codex
    codex = argv[argv.index("codex") :]
    assert codex[:4] == ["codex", "exec", "--json", "--skip-git-repo-check"]
    assert "--model=gpt-test" in codex and "model_reasoning_effort=high" in codex
    assert "/pi/agent/codex/codex_turns.py" in argv and "--sandbox=read-only" not in argv
    assert argv[argv.index("--") - 1] == "5.0"  # the abort's grace, in seconds
    read_only = CODEX.container_command(config.profiles["codex"], True, "/pi/agent", "/tmp/s")
    assert read_only[-1] == "--sandbox=read-only"


def test_each_turn_is_a_process_and_the_next_resumes_the_thread(run: Run) -> None:
    first = run.agent.wait(run.agent.prompt("make f"), 30.0)
    assert first.status == "completed" and first.text == "done: make f"
    assert first.tool_calls == 1 and first.usage == Usage(40, 9)
    second = run.agent.wait(run.agent.prompt("now g"), 30.0)
    assert second.status == "completed" and second.text == "done: now g"
    one, two = run.turns()
    assert one["argv"] == ["exec", "--json", "--skip-git-repo-check", "--model=gpt-test",
                           "--config", "model_reasoning_effort=high", "-"]  # fmt: skip
    assert two["argv"] == [*one["argv"][:-1], "resume", THREAD, "-"]
    assert one["pid"] != two["pid"]
    assert (one["prompt"], two["prompt"]) == ("make f", "now g")  # on stdin, not argv
    # The token reaches each process in its environment, never in an argv.
    assert one["token"] == two["token"] == TOKEN
    assert not any(TOKEN in arg for arg in [*run.argv, *one["argv"], *two["argv"]])
    assert one["config"] == two["config"] == str(run.home / ".codex")  # config.toml copied


def test_abort_interrupts_the_turns_process_and_the_session_goes_on(run: Run) -> None:
    turn = run.agent.prompt("hang")
    pid = run.started(1)["pid"]
    run.agent.abort()
    snap = run.agent.wait(turn, 30.0)
    assert snap.status == "aborted" and snap.error is None
    assert Path(f"{run.record}.signals").read_text() == f"{int(signal.SIGINT)}\n"
    assert gone(pid)
    after = run.agent.wait(run.agent.prompt("again"), 30.0)
    assert after.status == "completed" and after.text == "done: again"
    assert run.turns()[1]["argv"][-3:] == ["resume", THREAD, "-"]


def test_a_process_that_outlives_the_interrupt_is_killed_after_the_grace(run: Run) -> None:
    turn = run.agent.prompt("stubborn")
    pid = run.started(1)["pid"]
    run.agent.abort()
    snap = run.agent.wait(turn, 30.0)
    assert snap.status == "aborted"
    # It took the SIGINT and went on; the SIGKILL to its group ended it.
    assert Path(f"{run.record}.signals").read_text() == f"{int(signal.SIGINT)}\n"
    assert gone(pid)
    assert run.agent.wait(run.agent.prompt("next"), 30.0).status == "completed"


def test_a_killed_process_fails_its_turn_in_writerpools_words(run: Run) -> None:
    turn = run.agent.prompt("hang")
    os.kill(run.started(1)["pid"], signal.SIGKILL)
    snap = run.agent.wait(turn, 30.0)
    assert snap.status == "failed" and snap.error == TURN_EXITED_ERROR
    assert snap.error.startswith("agent_turn_exited:") and snap.text is None
    assert run.agent.alive  # the session takes another prompt
    assert run.agent.wait(run.agent.prompt("next"), 30.0).status == "completed"


def test_a_process_that_ends_without_ending_its_turn_fails_it(run: Run) -> None:
    snap = run.agent.wait(run.agent.prompt("quit"), 30.0)
    assert snap.status == "failed" and snap.error == TURN_EXITED_ERROR


def test_a_turn_codex_failed_fails_with_the_answer_error(run: Run) -> None:
    snap = run.agent.wait(run.agent.prompt("fail"), 30.0)
    assert snap.status == "failed" and snap.error == ANSWER_ERROR


def test_close_during_a_turn_ends_its_process(run: Run) -> None:
    turn = run.agent.prompt("hang")
    pid = run.started(1)["pid"]
    run.agent.close(10.0)
    assert run.agent.turn(turn).status == "aborted"
    deadline = time.monotonic() + 10.0
    while not gone(pid):  # the stand-in is not our child: reaped by init in a moment
        assert time.monotonic() < deadline, "the turn's process outlived the session"
        time.sleep(0.05)
    assert not run.agent.alive


def test_no_codex_in_the_image_fails_the_start(
    tmp_path: Path, config: Config, agent_dir: Path
) -> None:
    with pytest.raises(WriterpoolError) as caught:
        Run(tmp_path, config, agent_dir, codex=False)
    assert caught.value.code == "session_start_failed"


def test_a_busy_session_refuses_a_second_prompt(run: Run) -> None:
    run.agent.prompt("hang")
    run.started(1)
    with pytest.raises(WriterpoolError) as caught:
        run.agent.prompt("more")
    assert caught.value.code == "session_busy"
    assert isinstance(run.agent, CodexAgent)


def test_the_driver_makes_itself_not_dumpable_before_it_reads_a_turn() -> None:
    # PR_GET_DUMPABLE (3) after the driver's own step: 0, so a command Codex runs
    # cannot open the driver's /proc/PID/fd and write a turn the server would read.
    driver = Path(__file__).parents[2] / "writerpool" / "payload" / "codex_turns.py"
    probe = (
        f"import ctypes, runpy; d = runpy.run_path({str(driver)!r}); "
        "assert d['not_dumpable']() is None; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "0"


def test_the_agents_binaries_are_execute_only_in_the_image() -> None:
    containerfile = (Path(__file__).parents[2] / "images" / "Containerfile").read_text()
    copies = [line for line in containerfile.splitlines() if line.startswith("COPY")]
    assert "COPY --from=agents --chmod=0711 claude/claude /usr/local/bin/claude" in copies
    assert "COPY --from=agents --chmod=0711 codex/bin/ /opt/codex/bin/" in copies
    assert not [c for c in copies if "agents" in c and "codex/bin" in c and "0711" not in c]
