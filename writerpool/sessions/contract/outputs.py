"""Output schemas of the tools: the shape of each tool's structured body.

Every body is either `{ok: true, ...}` or `{ok: false, error: {code, message}}`, so each
schema requires only `ok` and describes both. A client validates `structuredContent`
against these, and tests/e2e/snapshots/tools.json keeps a golden copy.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def nullable(kind: str, description: str) -> Schema:
    return {"type": [kind, "null"], "description": description}


def string(description: str) -> Schema:
    return {"type": "string", "description": description}


ERROR: Schema = {
    "type": "object",
    "description": "Present when ok is false: a stable code and a message without paths.",
    "properties": {"code": string("Stable error code."), "message": string("What failed.")},
    "required": ["code", "message"],
}

BASE: Schema = {
    "type": ["object", "null"],
    "description": "The branch the writer's clone started from, and its commit.",
    "properties": {"ref": string("Branch name."), "commit": string("Commit id (hex).")},
}

WORK: Schema = {
    "type": ["object", "null"],
    "description": "Where the session's work is now (container sessions).",
    "properties": {
        "headCommit": nullable("string", "The commit the writer's clone has checked out."),
        "headBranch": nullable("string", "The branch checked out (null when detached)."),
        "branchesChanged": {
            "type": "array",
            "description": "Branches created, moved or deleted since the session started, "
            "by name; at most 50 (5 in pi_session_list): see truncated.",
            "items": {
                "type": "object",
                "properties": {
                    "name": string("Branch name."),
                    "commit": nullable("string", "Its commit now (null: deleted)."),
                },
            },
        },
        "branchesChangedCount": nullable(
            "integer", "How many branches changed in all (null: the refs could not be read)."
        ),
        "truncated": {
            "type": "boolean",
            "description": "True when branchesChanged names fewer than changed, or the "
            "clone holds more refs than writerpool reads.",
        },
        "uncommittedChanges": {
            "type": ["boolean", "null"],
            "description": "Whether the clone holds uncommitted or untracked changes, judged "
            "between turns and at close (null while a turn runs).",
        },
        "note": string("Where the work goes next."),
    },
}

SESSION: Schema = {
    "type": "object",
    "description": "One session.",
    "properties": {
        "sessionId": string("The session id (s- and 16 hex digits)."),
        "workspace": string("Workspace alias."),
        "executionProfile": string("Execution profile alias."),
        "permission": string("read-only or coding."),
        "agent": string("The agent program the session runs: pi, claude-code or codex."),
        "placement": string("host or container."),
        "state": string("idle, running, failed or closed."),
        "createdAt": string("ISO 8601 UTC time."),
        "closedAt": nullable("string", "ISO 8601 UTC time, or null while open."),
        "turns": {"type": "integer", "description": "How many turns were prompted."},
        "lastTurnId": nullable("string", "The latest turn id, or null."),
        "writer": nullable("string", "The leased writer (container sessions)."),
        "base": BASE,
        "work": WORK,
    },
}

TURN: Schema = {
    "type": "object",
    "description": "One turn of a session.",
    "properties": {
        "turnId": string("The turn id (t- and a number)."),
        "status": string("running, completed, failed or aborted."),
        "stopReason": nullable("string", "stop, length, toolUse, error or aborted."),
        "toolCalls": {"type": "integer", "description": "Tools the agent ran in this turn."},
        "text": nullable("string", "A page of the final answer (completed turns only)."),
        "textOffset": {"type": "integer", "description": "Where the page starts."},
        "textLength": nullable("integer", "Length of the whole kept answer, in characters."),
        "nextOffset": nullable("integer", "offset of the next page; null: no more."),
        "textTruncated": {
            "type": "boolean",
            "description": "True when the agent's answer was longer than the server keeps "
            "(64 KiB), so even all pages together miss its end.",
        },
        "error": nullable("string", "Why a failed turn failed, in a few words; else null."),
        "startedAt": nullable("string", "ISO 8601 UTC time."),
        "updatedAt": nullable("string", "ISO 8601 UTC time."),
        "endedAt": nullable("string", "ISO 8601 UTC time, or null while running."),
        "egressDenied": {
            "type": "array",
            "description": "Destinations the workspace's allowlist proxy refused in this "
            "session so far, and why (present only when there are some).",
            "items": {
                "type": "object",
                "properties": {
                    "destination": string("host:port as the agent asked for it."),
                    "reason": string("not_listed, port_not_listed, address_loopback, ..."),
                },
            },
        },
    },
}

CAPABILITIES: dict[str, Schema] = {
    "version": string("writerpool's version."),
    "configFingerprint": string("sha256 of the configuration the server loaded."),
    "reloadPolicy": string(
        "restart-required (`writerpool serve` reads its configuration once) or on-change "
        "(the service re-reads it when it changes)."
    ),
    "workspaces": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "alias": string("Workspace alias."),
                "mode": string("host, container, read-only or unset."),
                "writers": {"type": "integer", "description": "Configured writers."},
                "warm": {
                    "type": "integer",
                    "description": "Writers the pool service keeps started for a quick start.",
                },
                "warmReady": {
                    "type": "integer",
                    "description": "Writers the pool service holds warm now (the service only).",
                },
                "warmHosts": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "description": "The warm count on each host writers are placed on.",
                },
                "warmReadyByHost": {
                    "type": "object",
                    "additionalProperties": {"type": "integer"},
                    "description": "Writers held warm now on each host (the service only).",
                },
                "defaultBase": string("The base branch used when none is given."),
                "containerProfiles": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
    "profiles": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "alias": string("Profile alias."),
                "permission": string("read-only or coding."),
                "agent": string("The agent program: pi, claude-code or codex."),
                "default": {"type": "boolean"},
            },
        },
    },
}


def body(properties: dict[str, Schema]) -> Schema:
    """The output schema of a tool whose success body has these properties."""
    return {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean", "description": "true on success; false with error."},
            "error": ERROR,
            **properties,
        },
        "required": ["ok"],
    }
