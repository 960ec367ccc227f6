"""Where writerpool keeps things: one Paths object built from platformdirs."""

from __future__ import annotations

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
    def image_cache_dir(self) -> Path:
        return self.cache_dir / "image"
