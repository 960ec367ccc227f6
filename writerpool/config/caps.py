"""A session's egress caps: a module of its own so that the egress process, which needs
them, does not load the configuration's models (a third of its start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    """What one session may send through its provider proxy (see docs/execution-modes.md)."""

    requests: int
    bytes_up: int
    bytes_down: int
    concurrent: int
