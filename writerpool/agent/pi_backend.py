"""pi as one agent backend: models.json and settings.json in the agent directory, the
image's `pi` launcher in a container, RPC mode (pi.py)."""

from __future__ import annotations

import json
from pathlib import Path

from writerpool.agent import launch as pi_launch
from writerpool.agent.pi import PiAgent
from writerpool.config.models import Config, Profile
from writerpool.config.providers import PLACEHOLDER_KEY, ResolvedProvider

# The image's launcher for pi (images/pi-launcher, on PATH): it starts the egress
# forwarder when the container has one; pi's environment is the container's own.
PI_COMMAND = "pi"


class PiBackend:
    name = "pi"
    can_warm = True

    def render(self, config: Config, agent_dir: Path, provider: str, container: bool) -> None:
        pi_launch.render_for_profile(config, agent_dir, provider, container)

    def point_at_proxy(
        self, agent_dir: Path, provider: ResolvedProvider, base_url: str, token: str
    ) -> None:
        pi_launch.point_at_proxy(agent_dir, provider, base_url, token)

    def install_credential(self, agent_dir: Path, provider: str, key: str) -> None:
        pi_launch.install_credential(agent_dir, provider, key)

    def remove_credential(self, agent_dir: Path) -> None:
        pi_launch.remove_credential(agent_dir)

    def holds_credential(self, agent_dir: Path) -> bool:
        if (agent_dir / "auth.json").exists():
            return True
        try:
            document = json.loads((agent_dir / "models.json").read_bytes())
        except FileNotFoundError:
            return False
        except (OSError, ValueError):
            return True
        providers = document.get("providers") if isinstance(document, dict) else None
        if not isinstance(providers, dict):
            return True
        unkeyed = (None, PLACEHOLDER_KEY)
        return any(
            not isinstance(entry, dict) or entry.get("apiKey") not in unkeyed
            for entry in providers.values()
        )

    def container_command(
        self, profile: Profile, read_only: bool, agent_dir: str | Path, session_dir: str
    ) -> list[str]:
        args = pi_launch.pi_args(profile, read_only, agent_dir, session_dir=session_dir)
        return [PI_COMMAND, *args]

    def start(
        self, argv: list[str], env: dict[str, str], cwd: Path | None, timeout: float
    ) -> PiAgent:
        return PiAgent.start(argv, env, cwd, timeout)


PI = PiBackend()
