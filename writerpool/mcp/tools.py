"""The tool surface of `writerpool serve`: names, descriptions, input schemas, annotations.

This table is the contract coding clients see; tests/e2e/snapshots/tools.json holds
a golden copy, and a test fails when the two drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALIAS_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
SESSION_ID_PATTERN = r"^s-[0-9a-f]{16}$"
TURN_ID_PATTERN = r"^t-[1-9][0-9]{0,5}$"
# A branch name as a client would type it; the pool applies git's full rules.
BASE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$"
MESSAGE_MAX_CHARS = 65536
WAIT_MAX_SECONDS = 60


@dataclass(frozen=True)
class Hints:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    hints: Hints

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.required),
            "additionalProperties": False,
        }


_WORKSPACE = {
    "type": "string",
    "pattern": ALIAS_PATTERN,
    "description": "Workspace alias from pi_capabilities_get.",
}
_PROFILE = {
    "type": "string",
    "pattern": ALIAS_PATTERN,
    "description": "Execution profile alias; omit for the configured default (read-only).",
}
_BASE = {
    "type": "string",
    "pattern": BASE_PATTERN,
    "maxLength": 200,
    "description": "Base branch for a coding session in a container workspace; "
    "omit for the workspace's default base.",
}
_SESSION = {
    "type": "string",
    "pattern": SESSION_ID_PATTERN,
    "description": "Session id returned by pi_session_start.",
}
_TURN = {
    "type": "string",
    "pattern": TURN_ID_PATTERN,
    "description": "Turn id returned by pi_session_prompt.",
}
_MESSAGE = {
    "type": "string",
    "minLength": 1,
    "maxLength": MESSAGE_MAX_CHARS,
    "description": "The instruction for the agent.",
}
_WAIT = {
    "type": "number",
    "minimum": 0,
    "maximum": WAIT_MAX_SECONDS,
    "description": "Wait up to this many seconds for the turn to end (default 0).",
}

_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "pi_capabilities_get",
        "Describe workspaces and profiles",
        "Report the server version, the configuration fingerprint (loaded once; changes need "
        "a restart), each workspace's alias, execution mode, configured writers and default "
        "base, and each execution profile with its permission.",
        {},
        (),
        _READ,
    ),
    ToolSpec(
        "pi_session_start",
        "Start an agent session",
        "Start a pi agent session in a workspace. A read-only profile runs on the host with "
        "read-only tools. A coding profile follows the workspace mode: in a container "
        "workspace it leases a ready writer on the requested base branch; in a host "
        "workspace it edits the operator's checkout; a read-only workspace refuses it.",
        {"workspace": _WORKSPACE, "executionProfile": _PROFILE, "base": _BASE},
        ("workspace",),
        Hints(read_only=False, destructive=False, idempotent=False, open_world=False),
    ),
    ToolSpec(
        "pi_session_list",
        "List sessions",
        "List this server's sessions, including closed ones, with their state.",
        {},
        (),
        _READ,
    ),
    ToolSpec(
        "pi_session_get",
        "Describe a session",
        "Report one session: workspace, profile, placement, state, writer and base.",
        {"sessionId": _SESSION},
        ("sessionId",),
        _READ,
    ),
    ToolSpec(
        "pi_session_prompt",
        "Send a prompt",
        "Send a message to the session's agent, which calls its model provider and may use "
        "its tools (a coding session edits files). Returns a turn id at once; poll "
        "pi_turn_get for the result. One turn runs at a time per session.",
        {"sessionId": _SESSION, "message": _MESSAGE},
        ("sessionId", "message"),
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
    ),
    ToolSpec(
        "pi_turn_get",
        "Read a turn",
        "Report a turn's status (running, completed, failed, aborted), stop reason and, once "
        "completed, the final assistant text (at most 64 KiB). Optionally wait for it to end.",
        {"sessionId": _SESSION, "turnId": _TURN, "waitSeconds": _WAIT},
        ("sessionId", "turnId"),
        _READ,
    ),
    ToolSpec(
        "pi_session_abort",
        "Abort the running turn",
        "Abort the session's running turn, if any; the session stays open.",
        {"sessionId": _SESSION},
        ("sessionId",),
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    ),
    ToolSpec(
        "pi_session_close",
        "Close a session",
        "Stop the session's agent (and its writer container), remove its credential and "
        "release its writer. Closing a closed session succeeds again.",
        {"sessionId": _SESSION},
        ("sessionId",),
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
    ),
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {tool.name: tool for tool in TOOLS}
