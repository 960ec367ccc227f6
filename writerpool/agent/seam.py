"""What a session needs of its agent, whichever agent a profile names (pi, Claude Code,
Codex): one Protocol for the backend (its settings, argv and environment, how it
starts) and one for the running agent (prompt, abort, turns in the one turn model of
events.py). Every caller goes through these; backends.py says which backend a name is.

An agent's settings always point it at the session's egress endpoint (the in-writer
forwarder, or the host's proxy) with the session's token: no backend writes a real
credential where the agent runs, except where the network kind gives the key to the
agent (egress.py says which).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from writerpool.agent.events import TurnSnapshot
from writerpool.config.models import Config, Profile
from writerpool.config.providers import ResolvedProvider


class RunningAgent(Protocol):
    """One started agent and the turns it ran (thread-safe)."""

    @property
    def alive(self) -> bool: ...
    def prompt(self, message: str) -> str: ...
    def abort(self) -> None: ...
    def turn(self, turn_id: str) -> TurnSnapshot: ...
    def wait(self, turn_id: str, timeout: float) -> TurnSnapshot: ...
    def watch(self, turn_id: str, wake: Callable[[], None]) -> Callable[[], None]: ...
    def close(self, timeout: float) -> None: ...


class WarmAgent(RunningAgent, Protocol):
    """An agent that can be started idle, without a credential, and given a session's
    provider and model when a session claims it (warm writers)."""

    @property
    def pid(self) -> int: ...
    def configure(self, provider: str, model: str, thinking: str, timeout: float) -> None: ...


class AgentBackend(Protocol):
    """One agent program: how its directory is rendered, how it is started in a container."""

    name: str  # the profile's `agent`
    can_warm: bool  # starts idle and takes a session's settings later (WarmAgent)

    def render(self, config: Config, agent_dir: Path, provider: str, container: bool) -> None:
        """Write the agent's settings for this provider into agent_dir, without any key."""
        ...

    def point_at_proxy(
        self, agent_dir: Path, provider: ResolvedProvider, base_url: str, token: str
    ) -> None:
        """Send the provider's requests to the session's proxy at base_url, the session's
        token as the key (the proxy swaps it for the real one)."""
        ...

    def install_credential(self, agent_dir: Path, provider: str, key: str) -> None:
        """Give the agent the provider's key itself (networks that are not limited)."""
        ...

    def remove_credential(self, agent_dir: Path) -> None:
        """Take any token or key this backend writes out of agent_dir (idempotent)."""
        ...

    def holds_credential(self, agent_dir: Path) -> bool:
        """Whether agent_dir may hold a token or key of this backend (unreadable: yes)."""
        ...

    def container_command(
        self, profile: Profile, read_only: bool, agent_dir: str | Path, session_dir: str
    ) -> list[str]:
        """The command a session's container runs (environment included, by `env`):
        `agent_dir` where the agent directory is mounted, `session_dir` a private
        directory outside /work, on the container's tmpfs."""
        ...

    def start(
        self, argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float
    ) -> RunningAgent:
        """Run argv and return once the agent is ready for a prompt (session_start_failed)."""
        ...


class WarmBackend(AgentBackend, Protocol):
    """A backend whose agents can be warmed (`can_warm`)."""

    def start(
        self, argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float
    ) -> WarmAgent: ...
