"""A session's egress caps: a module of its own so that the egress process, which needs
them, does not load the configuration's models (some 50 ms of CPU at each start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    """What one session may send through its provider proxy (see docs/execution-modes.md)."""

    requests: int
    bytes_up: int
    bytes_down: int
    concurrent: int
