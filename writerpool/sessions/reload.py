"""Settings without restarts (the service): the configuration and the execution modes
are re-read when either file changes, validated first. An invalid change keeps the last
good settings, and a record of why (0600, beside the service's other files) lets
`writerpool doctor` say so until a valid change replaces it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path

from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.models import LoadedConfig, load_config
from writerpool.config.modes import ExecutionModes, load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.report import sanitize

log = logging.getLogger(__name__)

Signature = tuple[tuple[int, int, int] | None, ...]


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class SettingsWatch:
    """Whether the configuration or the modes file changed since last seen."""

    def __init__(self, paths: Paths) -> None:
        self._paths = paths
        self._seen = self.signature()

    def signature(self) -> Signature:
        return (_stat(self._paths.config_file), _stat(self._paths.modes_file))

    def changed(self) -> Signature | None:
        now = self.signature()
        return None if now == self._seen else now

    def load(self, now: Signature) -> tuple[LoadedConfig, ExecutionModes] | None:
        """The new settings when valid; else None, and the refusal is recorded. Either
        way this change is not read again."""
        self._seen = now
        try:
            loaded = load_config(self._paths)
            modes = load_modes(self._paths)
        except WriterpoolError as exc:
            log.error("a settings change was refused (%s): %s", exc.code, sanitize(exc.message))
            ensure_private_dir(self._paths.settings_refused_file.parent)
            record = {"code": exc.code, "message": sanitize(exc.message)}
            write_atomic(self._paths.settings_refused_file, json.dumps(record).encode(), mode=0o600)
            return None
        with contextlib.suppress(FileNotFoundError):
            self._paths.settings_refused_file.unlink()
        log.info("settings reloaded: %s", loaded.fingerprint)
        return loaded, modes


def clear(paths: Paths) -> None:
    """At start, and when the service ends: no refusal outlives the service."""
    with contextlib.suppress(FileNotFoundError):
        paths.settings_refused_file.unlink()
