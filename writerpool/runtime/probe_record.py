"""A passing probe of Podman, kept for the writer operations that follow it.

Every writer operation is gated by doctor's blocking checks, and their costly part is the
same each time: `podman version`, `podman info` (which asks the package manager about
every helper) and a trial container. A probe that passed is recorded in the account's
runtime directory (tmpfs: a reboot forgets it) with a key of what it depends on: the
account, the podman executable, Podman's configuration files and the package database
(an upgrade of Podman or a helper changes it). A gate within MAX_AGE of that probe, with
the same key, reuses it; anything else, and `writerpool doctor` always, probes afresh.
What a gate checks beside Podman (images present, the API socket, subuid, devices,
cgroups) is looked at every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from writerpool.atomic import write_atomic
from writerpool.runtime.podman import executable_stamp, file_stamp

MAX_AGE = 600.0  # seconds
RECORD_NAME = "podman-probe.json"
_ENV = ("WRITERPOOL_PODMAN", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINER_HOST")
_SYSTEM_FILES = (
    "/var/lib/dpkg/status",  # an upgrade of podman, runc, crun, conmon or slirp4netns
    "/etc/subuid", "/etc/subgid",
    "/etc/containers/containers.conf", "/etc/containers/containers.conf.d",
    "/etc/containers/storage.conf",
    "/usr/share/containers/containers.conf", "/usr/share/containers/storage.conf",
)  # fmt: skip
_USER_FILES = (
    ".config/containers/containers.conf", ".config/containers/containers.conf.d",
    ".config/containers/storage.conf",
)  # fmt: skip


@dataclass(frozen=True)
class Probe:
    """What a passing probe found: Podman's version and info as their models dumped them
    (runtime/info.py validates them again), and the image whose trial container ran
    (None when no trial ran)."""

    version: dict[str, Any]
    info: dict[str, Any]
    trial_image: str | None
    at: float


def record_path() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return Path(runtime) / "writerpool" / RECORD_NAME


def probe_key(binary: str) -> str:
    """The digest of what a probe of Podman depends on, besides time."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    parts = {
        "uid": os.getuid(),
        "podman": executable_stamp(binary),
        "env": {name: os.environ.get(name) for name in _ENV},
        "files": {name: file_stamp(name) for name in _SYSTEM_FILES},
        "home": {name: file_stamp(str(home / name)) for name in _USER_FILES},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def recent_probe(key: str, now: float | None = None) -> Probe | None:
    """The recorded probe when it was made under `key` (probe_key) and is younger than
    MAX_AGE."""
    try:
        raw = json.loads(record_path().read_bytes())
        if raw["key"] != key:
            return None
        at = float(raw["at"])
        age = (time.time() if now is None else now) - at
        if not 0 <= age <= MAX_AGE:
            return None
        version, info, trial = raw["version"], raw["info"], raw["trial"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not isinstance(version, dict) or not isinstance(info, dict):
        return None
    return Probe(version, info, trial if isinstance(trial, str) else None, at)


def save_probe(key: str, probe: Probe) -> None:
    """Record a passing probe under the key taken before it ran (a file changed while it
    ran makes the record stale, not wrong); where the runtime directory is not writable,
    nothing."""
    record = {
        "key": key,
        "at": probe.at,
        "version": probe.version,
        "info": probe.info,
        "trial": probe.trial_image,
    }
    path = record_path()
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        write_atomic(path, json.dumps(record).encode())
    except OSError:
        return
