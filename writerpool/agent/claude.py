"""Claude Code as an agent backend: one long-lived `claude -p` per session speaking
stream-json on stdin and stdout, prompts as user messages, an abort as an interrupt
control request; its lines fold into turns through claude_events.py.

Its directory (`claude/` in the agent directory, mounted read-only in a writer) holds
`settings.json`: the forwarder as ANTHROPIC_BASE_URL, an `apiKeyHelper` that prints
the `key` file beside it (the per-session token: never an environment variable the
next session could inherit), no auto-update, no telemetry, no permission prompts
(inside a writer the container is the boundary; host mode never runs this agent:
docs/security.md). Its writable state (CLAUDE_CONFIG_DIR) is the session's private
directory on the container's tmpfs, seeded with the onboarding answers.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from writerpool.agent.claude_events import fold_claude, interrupting, parse_line
from writerpool.agent.key_file import KEY_FILE, KeyFile
from writerpool.agent.process import LineAgent
from writerpool.atomic import write_atomic
from writerpool.config.models import Config, Profile
from writerpool.config.providers import ResolvedProvider

SUBDIR = "claude"
SETTINGS_FILE = "settings.json"
QUIET_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
ONBOARDED = '{"hasCompletedOnboarding": true, "bypassPermissionsModeAccepted": true}'
# pi's variables in a writer's environment are not this agent's.
UNSET = ("NODE_OPTIONS", "PI_CODING_AGENT_DIR")
# The image's native binary (images/Containerfile), named in full: the forwarder execs it.
CLAUDE_BIN = "/usr/local/bin/claude"
FORWARDER = "/usr/local/lib/writerpool/egress-forwarder"
# Run in the container by `sh -c SEED sh CONFIG_DIR CLAUDE ARGS...`: seed the onboarding
# answers, then, on `provider` networking (the forwarder's variables are set), run Claude
# Code under the image's egress forwarder as pi-launcher runs pi: the forwarder listens on
# ANTHROPIC_BASE_URL's loopback port first, relays it to the session's proxy socket and
# stays PID 1 while Claude Code runs. Elsewhere Claude Code becomes this process.
SEED = (
    'mkdir -p "$1" && printf %s \'' + ONBOARDED + '\' > "$1/.claude.json" && shift || exit 126\n'
    'if [ -n "${WRITERPOOL_EGRESS_PORT:-}" ] && [ -n "${WRITERPOOL_EGRESS_SOCKET:-}" ]; then\n'
    f'    exec /usr/bin/python3 -I -S {FORWARDER} --supervise "$@"\n'
    "fi\n"
    'exec "$@"\n'
)


def settings_document(agent_dir: str | Path, base_url: str | None) -> dict[str, Any]:
    env = dict(QUIET_ENV)
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url
    key = PurePosixPath(str(agent_dir)) / SUBDIR / KEY_FILE
    return {
        "apiKeyHelper": f"cat {key}",
        "env": env,
        "permissions": {"defaultMode": "bypassPermissions"},
        "includeCoAuthoredBy": False,
    }


class ClaudeAgent(LineAgent):
    name = "claude"

    def _handshake(self, timeout: float) -> None:
        # Claude Code says nothing until its first message: alive after a moment is ready.
        if self._exited(min(timeout, 0.5)):
            raise self._start_failed("exited")

    def _prompt_command(self, message: str, prompt_id: str) -> Mapping[str, object]:
        content = [{"type": "text", "text": message}]
        return {"type": "user", "message": {"role": "user", "content": content}}

    def _abort(self, timeout: float) -> None:
        self._fold(lambda turns: interrupting(turns, time.time()))
        request = {"subtype": "interrupt"}
        self._send({"type": "control_request", "request_id": secrets.token_hex(6),
                    "request": request})  # fmt: skip
        self.wait_quiet(timeout)

    def _take(self, line: bytes) -> None:
        event = parse_line(line)
        if event is not None:
            self._fold(lambda turns: fold_claude(turns, event, time.time()))


class ClaudeBackend(KeyFile):
    name = "claude-code"
    subdir = SUBDIR
    can_warm = False

    def render(self, config: Config, agent_dir: Path, provider: str, container: bool) -> None:
        del config, provider, container  # the endpoint comes with the grant
        target = agent_dir / SUBDIR
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._write_settings(agent_dir, None)

    def _write_settings(self, agent_dir: Path, base_url: str | None) -> None:
        document = settings_document(_mounted(agent_dir), base_url)
        write_atomic(
            agent_dir / SUBDIR / SETTINGS_FILE,
            json.dumps(document, indent=2).encode(),
            durable=False,
        )

    def point_at_proxy(
        self, agent_dir: Path, provider: ResolvedProvider, base_url: str, token: str
    ) -> None:
        del provider
        self._write_settings(agent_dir, base_url.removesuffix("/v1"))
        self.write_key(agent_dir, token)

    def container_command(
        self, profile: Profile, read_only: bool, agent_dir: str | Path, session_dir: str
    ) -> list[str]:
        config_dir = f"{session_dir}/claude"
        settings = f"{PurePosixPath(str(agent_dir)) / SUBDIR / SETTINGS_FILE}"
        tools = ["--allowedTools", "Read,Grep,Glob"] if read_only else []
        claude = [
            CLAUDE_BIN, "-p", "--output-format", "stream-json", "--input-format", "stream-json",
            "--verbose", "--settings", settings, "--model", profile.model,
            "--permission-mode", "plan" if read_only else "bypassPermissions", *tools,
        ]  # fmt: skip
        unset = [arg for name in UNSET for arg in ("-u", name)]
        return ["env", *unset, f"CLAUDE_CONFIG_DIR={config_dir}",
                "sh", "-c", SEED, "sh", config_dir, *claude]  # fmt: skip

    def start(
        self, argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float
    ) -> ClaudeAgent:
        return ClaudeAgent.start(argv, env, cwd, timeout)


def _mounted(agent_dir: Path) -> str:
    """Where agent_dir is seen by the agent: a writer mounts it at /pi/agent."""
    del agent_dir
    return "/pi/agent"


CLAUDE = ClaudeBackend()
