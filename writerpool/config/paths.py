"""Where writerpool keeps things: one Paths object built from platformdirs."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP = "writerpool"


@dataclass(frozen=True)
class Paths:
    config_file: Path
    state_dir: Path
    cache_dir: Path

    @classmethod
    def from_env(cls) -> Paths:
        explicit = os.environ.get("WRITERPOOL_CONFIG")
        config = (
            Path(explicit) if explicit else Path(platformdirs.user_config_dir(APP)) / "config.toml"
        )
        return cls(
            config_file=config.absolute(),
            state_dir=Path(platformdirs.user_state_dir(APP)),
            cache_dir=Path(platformdirs.user_cache_dir(APP)),
        )

    @property
    def modes_file(self) -> Path:
        return self.config_file.parent / "execution-modes.json"

    @property
    def writers_dir(self) -> Path:
        return self.state_dir / "writers"

    def writer_dir(self, name: str) -> Path:
        return self.writers_dir / name

    def writer_record(self, name: str) -> WriterRecord:
        return WriterRecord(self.writer_dir(name))

    @property
    def control_file(self) -> Path:
        return self.state_dir / "isolation-control.json"

    @property
    def image_pin_file(self) -> Path:
        return self.state_dir / "image.json"

    @property
    def service_dir(self) -> Path:
        """The pool service's files: its record, its port, the clients' tokens and a
        refused settings change."""
        return self.state_dir / "service"

    @property
    def settings_refused_file(self) -> Path:
        """Why the service refused the last settings change (sessions/reload.py); doctor
        reports it while it exists."""
        return self.service_dir / "settings-refused.json"

    @property
    def audit_log(self) -> Path:
        return self.state_dir / "audit.log"

    @property
    def pi_prefix(self) -> Path:
        """Where pi is installed for host sessions and copied into the image from."""
        return self.cache_dir / "pi"

    @property
    def agents_prefix(self) -> Path:
        """The npm prefix of the Claude Code and Codex packages the image copies from."""
        return self.cache_dir / "agents"

    @property
    def image_cache_dir(self) -> Path:
        return self.cache_dir / "image"


@dataclass(frozen=True)
class WriterRecord:
    """A writer's record directory on the controller, and every name in it: its state,
    lease and the lease's bookkeeping, the session guard's verdict, the acceptance
    failure, the collected bundles, a session's proxy sockets and the rendering of its
    agent directory. A local writer's storage parts sit beside them (runtime/local.py)."""

    path: Path

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def lease_file(self) -> Path:
        return self.path / "lease"

    @property
    def lease_count_file(self) -> Path:
        return self.path / "lease-count"

    @property
    def yield_request(self) -> Path:
        """An operator command asks the warm writer's holder to yield (pool/writer/lease.py)."""
        return self.path / "yield"

    @property
    def verdict_file(self) -> Path:
        return self.path / "verdict.json"

    @property
    def changed_file(self) -> Path:
        return self.path / "changed"

    @property
    def failure_file(self) -> Path:
        return self.path / "acceptance-failure.json"

    @property
    def egress(self) -> Path:
        return self.path / "egress"

    @property
    def egress_grants(self) -> Path:
        """Session-scoped allowlist entries of the session on this writer (egress/grants.py):
        beside the egress directory, never inside what the writer mounts."""
        return self.path / "egress-grants.json"

    @property
    def rendered_agent(self) -> Path:
        """The agent directory as the controller last rendered it. Written only through
        `WriterHost.agent_dir`, which makes it what the writer's containers mount; a key
        is taken out of it here (a host over SSH never receives one)."""
        return self.path / "agent"

    @property
    def collections(self) -> Path:
        # Collection streams the bundle to the controller, which keeps it for audit.
        return self.path / "collections"

    def state_digest(self) -> str:
        """The state file's digest ("" when unreadable): verdicts and warm writers are
        current only for the state they were made from."""
        try:
            return hashlib.sha256(self.state_file.read_bytes()).hexdigest()
        except OSError:
            return ""


# Files of a writer's record that do not make a writer (a removed writer may keep them).
BOOKKEEPING = frozenset({"lease", "lease-count", "verdict.json", "changed", "yield",
                         "egress-grants.json", "egress-grants.json.lock"})  # fmt: skip
