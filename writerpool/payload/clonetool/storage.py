"""The writer's other storage a tool is given, each part mounted at /storage/PART by the
controller (pool/writer/inspect.py tool_spec): the inspection tells whether the cache holds
anything; reset and provision (a recreate) empty every part they are given, on the
writer's host, so the controller never reads or removes that storage itself."""

from __future__ import annotations

import os

from .removal import empty_dir

ROOT = "/storage"


def _parts() -> list[str]:
    try:
        return sorted(os.listdir(ROOT))
    except FileNotFoundError:
        return []


def clear() -> None:
    """Empty every storage part this container was given."""
    for part in _parts():  # bounded by the mounts: the cache and the agent directory
        empty_dir(os.path.join(ROOT, part))


def held(part: str) -> str | None:
    """`empty` or `held` (anything at all in it), `unreadable`, or None: not given."""
    path = os.path.join(ROOT, part)
    if not os.path.isdir(path):
        return None
    try:
        with os.scandir(path) as entries:
            return "held" if any(True for _ in entries) else "empty"
    except OSError:
        return "unreadable"
