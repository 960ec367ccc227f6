"""Which backend an agent name is, and what is done to an agent directory whatever
agent last used it (a writer's directory serves the profiles of every session)."""

from __future__ import annotations

from pathlib import Path

from writerpool.agent.claude import CLAUDE
from writerpool.agent.codex import CODEX
from writerpool.agent.pi_backend import PI
from writerpool.agent.seam import AgentBackend, WarmBackend
from writerpool.config.models import AgentName
from writerpool.errors import WriterpoolError

BACKENDS: dict[str, AgentBackend] = {PI.name: PI, CLAUDE.name: CLAUDE, CODEX.name: CODEX}


def backend_for(name: AgentName | str) -> AgentBackend:
    backend = BACKENDS.get(name)
    if backend is None:
        raise WriterpoolError(
            "agent_unsupported", f"agent {name!r} is not available in this writerpool"
        )
    return backend


def remove_credentials(agent_dir: Path) -> None:
    """Take every backend's token or key out of agent_dir (idempotent)."""
    for backend in BACKENDS.values():
        backend.remove_credential(agent_dir)


def holds_credential(agent_dir: Path) -> bool:
    return any(backend.holds_credential(agent_dir) for backend in BACKENDS.values())


WARM_BACKENDS: dict[str, WarmBackend] = {PI.name: PI}


def warm_backend_for(name: str) -> WarmBackend | None:
    """The backend of this agent when its agents can be warmed, else None."""
    return WARM_BACKENDS.get(name)
