"""The tool table: each tool's name, title, description, arguments model (arguments.py),
output schema (outputs.py) and annotations.

This table is the contract coding clients see; tests/e2e/snapshots/tools.json holds
a golden copy, and a test fails when the two drift apart.

Descriptions are written for a model that has never heard of pi or writerpool, and
state every range and default in words: some clients (Codex) drop `pattern`,
`minimum`, `maximum` and length limits from the schemas they show the model.

Annotations follow the MCP definitions: `destructiveHint` is true only for a tool that
may destroy or overwrite something not easily recovered. A prompt in a container
workspace changes only the writer's clone, whose work is kept until the operator
collects it; abort and close lose nothing. A prompt is destructive only where a coding
profile works in the operator's own checkout (a `host` or unset mode), and the server
then says so (see `annotations_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from writerpool.sessions.contract import outputs
from writerpool.sessions.contract.arguments import (
    TEXT_PAGE_DEFAULT,
    WAIT_MAX_SECONDS,
    CapabilitiesGet,
    SessionAbort,
    SessionClose,
    SessionGet,
    SessionList,
    SessionPrompt,
    SessionStart,
    ToolArguments,
    TurnGet,
    input_schema,
)
from writerpool.sessions.contract.refusals import parse

GLOSSARY = (
    "pi is a coding agent (a language model with file and shell tools) that writerpool "
    "runs for you: you give it instructions and read its answers. A writer is an "
    "isolated container holding its own git clone of a workspace's repository; a coding "
    "session in a container workspace has one writer to itself, and pi edits and commits "
    "only there. A base is the branch a writer's clone starts from."
)
COLLECT_NOTE = (
    "Work stays in the writer until the operator collects it; it reaches the "
    "operator's checkout only then."
)


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
    arguments: type[ToolArguments]
    hints: Hints
    output: dict[str, outputs.Schema]

    def input_schema(self) -> dict[str, Any]:
        """The published schema of the arguments: the model's own."""
        return input_schema(self.arguments)

    def parse(self, arguments: object) -> ToolArguments:
        """The call's arguments validated by the model, or input_invalid (refusals.py)."""
        return parse(self.arguments, arguments)

    def output_schema(self) -> dict[str, Any]:
        return outputs.body(self.output)


_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)
# Changes the server's own bookkeeping (and a writer's container) but destroys nothing.
_ADDITIVE = Hints(read_only=False, destructive=False, idempotent=False, open_world=False)
_STOPS = Hints(read_only=False, destructive=False, idempotent=True, open_world=False)

_SESSION_OUT = {"session": outputs.SESSION}

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "pi_capabilities_get",
        "Describe workspaces and profiles",
        "Start here. writerpool runs pi sessions for you. "
        + GLOSSARY
        + " This reports the server version, the configuration fingerprint (loaded once; "
        "changes need a server restart), each workspace's alias, execution mode (container: "
        "coding happens in writers; host: in the operator's checkout; read-only: no coding), "
        "configured writers and default base, and each execution profile with its "
        "permission (read-only or coding).",
        CapabilitiesGet,
        _READ,
        outputs.CAPABILITIES,
    ),
    ToolSpec(
        "pi_session_start",
        "Start an agent session",
        "Start a pi agent session in a workspace and return its sessionId. "
        + GLOSSARY
        + " A read-only profile reads the workspace with read-only tools, in a throwaway "
        "container. A "
        "coding profile follows the workspace mode: in a container workspace it leases a "
        "free ready writer on the requested base (no free one: writer_unavailable); in a "
        "host workspace it edits the operator's checkout; a read-only workspace refuses it. "
        "Starting takes seconds to a minute; progress notifications report it. A session "
        "holds its writer until pi_session_close: close every session you start.",
        SessionStart,
        _ADDITIVE,
        _SESSION_OUT,
    ),
    ToolSpec(
        "pi_session_list",
        "List sessions",
        "List this server's sessions, open and closed, with their state (idle, running, "
        "failed, closed). Close sessions you no longer need to free their writers.",
        SessionList,
        _READ,
        {
            "sessions": {"type": "array", "items": outputs.SESSION},
            "omitted": {
                "type": "integer",
                "description": "Sessions left out to keep the answer under 256 KiB "
                "(the oldest closed ones first).",
            },
        },
    ),
    ToolSpec(
        "pi_session_get",
        "Describe a session",
        "Report one session: workspace, profile, placement (host or container), state, "
        "turns, and for a container session its writer, its base {ref, commit} and its work: "
        "the clone's head commit and the branches changed since the session started. "
        + COLLECT_NOTE,
        SessionGet,
        _READ,
        _SESSION_OUT,
    ),
    ToolSpec(
        "pi_session_prompt",
        "Send a prompt",
        "Send an instruction to the session's pi agent, which calls its model provider "
        "and may use its tools (in a coding session it edits files and may commit, in the "
        "writer's clone for a container workspace). Returns a turnId at once; then call "
        "pi_turn_get with waitSeconds to wait for the answer. One turn runs at a time per "
        "session (another prompt meanwhile: session_busy).",
        SessionPrompt,
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        {
            "sessionId": outputs.string("The session id."),
            "turnId": outputs.string("The new turn's id."),
            "status": outputs.string("running."),
        },
    ),
    ToolSpec(
        "pi_turn_get",
        "Read a turn",
        "Report a turn's status (running, completed, failed, aborted), its stop reason, how "
        "many tools the agent ran, and once completed a page of the final answer: offset and "
        f"limit choose it (default the first {TEXT_PAGE_DEFAULT} characters); textLength is "
        "the whole length and nextOffset the next page's start (null when none is left). "
        f"waitSeconds (0 to {WAIT_MAX_SECONDS}, default 0) waits for the turn to end, with "
        "progress notifications meanwhile; call again while it is still running. Also "
        "reports the session's work (head commit, changed branches). " + COLLECT_NOTE,
        TurnGet,
        _READ,
        {
            "sessionId": outputs.string("The session id."),
            "turn": outputs.TURN,
            "work": outputs.WORK,
        },
    ),
    ToolSpec(
        "pi_session_abort",
        "Abort the running turn",
        "Stop the session's running turn, if any; what the agent already did stays, and "
        "the session stays open for another prompt. Aborting with no turn running does "
        "nothing.",
        SessionAbort,
        _STOPS,
        {
            "sessionId": outputs.string("The session id."),
            "turnId": {"type": ["string", "null"], "description": "The aborted turn."},
            "aborted": {"type": "boolean", "description": "Whether a turn was running."},
        },
    ),
    ToolSpec(
        "pi_session_close",
        "Close a session",
        "Stop the session's agent (and its writer container), remove its credential and "
        "free its writer for other sessions. Nothing is lost: the work stays in the writer "
        "until the operator collects it. Closing a closed session succeeds again. Close "
        "every session you start once you are done with it.",
        SessionClose,
        _STOPS,
        _SESSION_OUT,
    ),
)

TOOLS_BY_NAME: dict[str, ToolSpec] = {tool.name: tool for tool in TOOLS}


def annotations_for(spec: ToolSpec, host_coding: bool) -> Hints:
    """The tool's hints for this server's configuration: a prompt may overwrite the
    operator's own files where a coding profile runs on the host."""
    if spec.name == "pi_session_prompt" and host_coding:
        return replace(spec.hints, destructive=True)
    return spec.hints
