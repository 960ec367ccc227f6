"""The one key file of an agent that reads its token or key from its agent directory
(Claude Code's apiKeyHelper, Codex's driver): `<agent_dir>/<subdir>/key`, mode 0600."""

from __future__ import annotations

from pathlib import Path

from writerpool.atomic import write_atomic
from writerpool.config.providers import usable_key
from writerpool.errors import WriterpoolError

KEY_FILE = "key"


class KeyFile:
    """A backend's credential methods (seam.AgentBackend) over its key file."""

    subdir: str  # the backend's directory in the agent directory

    def write_key(self, agent_dir: Path, secret: str) -> None:
        write_atomic(agent_dir / self.subdir / KEY_FILE, secret.encode(), mode=0o600, durable=False)

    def install_credential(self, agent_dir: Path, provider: str, key: str) -> None:
        if not usable_key(key):
            raise WriterpoolError(
                "provider_unconfigured", f"the credential for provider {provider} is unusable"
            )
        self.write_key(agent_dir, key)

    def remove_credential(self, agent_dir: Path) -> None:
        (agent_dir / self.subdir / KEY_FILE).unlink(missing_ok=True)

    def holds_credential(self, agent_dir: Path) -> bool:
        return (agent_dir / self.subdir / KEY_FILE).exists()
