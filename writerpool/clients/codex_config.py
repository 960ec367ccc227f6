"""The settings of writerpool's entry in Codex's config.toml that `codex mcp add` cannot
write: `required`, the startup and tool timeouts, and `env_vars`.

Codex gives an optional server about a second to start and then runs without it, passes
a server only HOME, LANG, LOGNAME, PATH and USER unless `env_vars` names more, and ends a
tool call after 60 s by default. The file is edited with tomlkit, which keeps every other
byte (comments, order, other servers) as it was, and replaced atomically with its mode.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import OutOfOrderTableProxy
from tomlkit.items import Table

from writerpool.atomic import write_atomic
from writerpool.clients.model import SERVER_NAME, Target
from writerpool.errors import WriterpoolError
from writerpool.report import Report

# Keys writerpool owns in [mcp_servers.writerpool] besides what `codex mcp add` writes.
# `tools` only when the operator chose --approve-prompts (PROMPT_APPROVAL); `env_vars`
# for the stdio server, `http_headers_helper` for the pool service's URL (which `codex
# mcp add` has no option for, and `codex mcp list` shows only as "<redacted>").
SETTING_KEYS = (
    "required", "startup_timeout_sec", "tool_timeout_sec", "env_vars", "tools",
    "http_headers_helper",
)  # fmt: skip
# The one tool Codex asks about (destructive and open-world when some coding profile
# works in an operator's checkout); approved, `codex exec` can prompt sessions.
PROMPT_TOOL = "pi_session_prompt"
PROMPT_APPROVAL = {PROMPT_TOOL: {"approval_mode": "approve"}}
# writerpool serve answers initialize in about half a second; a loaded host needs more.
STARTUP_TIMEOUT_SEC = 30
# pi_session_start may take 90 s on a busy host and pi_turn_get waits up to 60 s.
TOOL_TIMEOUT_SEC = 180


def config_file(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    home = env.get("CODEX_HOME") or str(Path(env.get("HOME") or Path.home()) / ".codex")
    return Path(home) / "config.toml"


def wanted_settings(env_vars: list[str], approve_prompts: bool = False) -> dict[str, Any]:
    wanted: dict[str, Any] = {
        "required": True,
        "startup_timeout_sec": STARTUP_TIMEOUT_SEC,
        "tool_timeout_sec": TOOL_TIMEOUT_SEC,
        "env_vars": sorted(set(env_vars)),
    }
    if approve_prompts:
        wanted["tools"] = PROMPT_APPROVAL
    return wanted


def http_settings(helper: str, approve_prompts: bool = False) -> dict[str, Any]:
    """The pool service's entry: the server runs already, but a call may take as long."""
    wanted: dict[str, Any] = {
        "required": True,
        "startup_timeout_sec": STARTUP_TIMEOUT_SEC,
        "tool_timeout_sec": TOOL_TIMEOUT_SEC,
        "http_headers_helper": helper,
    }
    if approve_prompts:
        wanted["tools"] = PROMPT_APPROVAL
    return wanted


def prompts_approved(settings: Mapping[str, Any]) -> bool:
    tools = settings.get("tools")
    entry = tools.get(PROMPT_TOOL) if isinstance(tools, dict) else None
    return isinstance(entry, dict) and entry.get("approval_mode") == "approve"


def read_settings(path: Path) -> dict[str, Any]:
    """writerpool's keys of the entry as the file holds them (absent keys left out)."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WriterpoolError("client_failed", "Codex's config.toml cannot be read") from exc
    entry = document.get("mcp_servers", {}).get(SERVER_NAME, {})
    if not isinstance(entry, dict):
        return {}
    return {key: entry[key] for key in SETTING_KEYS if key in entry}


def settings_problems(observed: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """What keeps Codex from using the server as writerpool needs (empty: nothing).
    Larger timeouts and more variables than writerpool asks for are fine."""
    problems = []
    if observed.get("required") is not True:
        problems.append("required is not true")
    for key in ("startup_timeout_sec", "tool_timeout_sec"):
        value = observed.get(key)
        if not isinstance(value, int | float) or value < wanted[key]:
            problems.append(f"{key} is below {wanted[key]}")
    if "env_vars" in wanted:
        have = observed.get("env_vars")
        missing = sorted(set(wanted["env_vars"]) - set(have if isinstance(have, list) else []))
        if missing:
            problems.append(f"env_vars lacks {', '.join(missing)}")
    if "http_headers_helper" in wanted and observed.get("http_headers_helper") != wanted.get(
        "http_headers_helper"
    ):
        problems.append("http_headers_helper is not writerpool's header helper")
    if prompts_approved(wanted) and not prompts_approved(observed):
        problems.append(f"{PROMPT_TOOL} is not approved (approval_mode)")
    return problems


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Set writerpool's keys in its existing entry, leaving the rest of the file as it is."""
    try:
        text = path.read_text(encoding="utf-8")
        document = tomlkit.parse(text)
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.TOMLKitError) as exc:
        raise WriterpoolError("client_failed", "Codex's config.toml cannot be read") from exc
    servers = document.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if servers is not None else None
    # A proxy when the entry's tables are split (`[…writerpool.tools.x]` further down).
    if not isinstance(entry, Table | OutOfOrderTableProxy):
        raise WriterpoolError("client_failed", "Codex's config.toml has no writerpool entry")
    for key, value in settings.items():
        if key == "tools":  # merged: approvals an operator set for other tools stay
            tools = entry.setdefault("tools", tomlkit.table(is_super_table=True))
            for tool, options in value.items():
                tools[tool] = options
        else:
            entry[key] = value
    mode = path.stat().st_mode & 0o777
    write_atomic(path, tomlkit.dumps(document).encode("utf-8"), mode=mode)


def prompt_approval(report: Report, where: str, target: Target) -> None:
    """Codex: say what the --approve-prompts choice permits, or why prompts ask without it."""
    if target.client != "codex":
        return
    if target.approve_prompts:
        report.add(
            "prompt_approval", "ok", where,
            "pi_session_prompt is approved (approval_mode = \"approve\"): Codex, `codex "
            "exec` included, lets its model prompt pi sessions without asking; a coding "
            "session's prompt changes a writer's clone (in host mode, your checkout) and "
            "calls the profile's model provider",
        )  # fmt: skip
        return
    report.add(
        "prompt_approval", "ok", where,
        "pi_session_prompt asks before each call (interactive Codex) and is refused under "
        "`codex exec` (approval policy never): writerpool marks it destructive and "
        "open-world, since a prompt makes a coding agent change files and call a model "
        "provider",
        remedy="to let Codex prompt sessions without asking, add --approve-prompts",
    )  # fmt: skip
