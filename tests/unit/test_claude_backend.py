"""Claude Code's backend: its settings hold no key, its token is a file, its argv."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from writerpool.agent.backends import backend_for, holds_credential, remove_credentials
from writerpool.agent.claude import CLAUDE
from writerpool.config.models import Profile


def test_settings_point_at_the_forwarder_and_the_token_is_a_private_file(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    CLAUDE.render(None, agent_dir, "p", True)  # type: ignore[arg-type]
    assert not holds_credential(agent_dir)
    CLAUDE.point_at_proxy(agent_dir, None, "http://127.0.0.1:41480/v1", "wpt-token")  # type: ignore[arg-type]
    settings_text = (agent_dir / "claude" / "settings.json").read_text()
    assert "wpt-token" not in settings_text
    settings = json.loads(settings_text)
    assert settings["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:41480"
    assert settings["env"]["DISABLE_AUTOUPDATER"] == "1"
    assert settings["apiKeyHelper"] == "cat /pi/agent/claude/key"
    key = agent_dir / "claude" / "key"
    assert key.read_text() == "wpt-token" and stat.S_IMODE(key.stat().st_mode) == 0o600
    remove_credentials(agent_dir)
    assert not key.exists() and not holds_credential(agent_dir)


def test_argv_is_one_streaming_process_without_prompts_or_pi_variables() -> None:
    profile = Profile(permission="coding", agent="claude-code", provider="p", model="m")
    argv = CLAUDE.container_command(profile, False, "/pi/agent", "/tmp/pi-sessions")
    assert argv[:5] == ["env", "-u", "NODE_OPTIONS", "-u", "PI_CODING_AGENT_DIR"]
    claude = argv[argv.index("/usr/local/bin/claude") :]
    assert claude[:8] == ["/usr/local/bin/claude", "-p", "--output-format", "stream-json",
                          "--input-format", "stream-json", "--verbose", "--settings"]  # fmt: skip
    assert "bypassPermissions" in claude and "ANTHROPIC_API_KEY" not in " ".join(argv)
    read_only = CLAUDE.container_command(profile, True, "/pi/agent", "/tmp/pi-sessions")
    assert "plan" in read_only and "bypassPermissions" not in read_only
    assert backend_for("claude-code") is CLAUDE and not CLAUDE.can_warm
