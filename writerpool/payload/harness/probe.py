"""What every check returns, and how a set of them runs."""

from __future__ import annotations

import os
from collections.abc import Callable

Result = tuple[str, str]  # (status, detail) with status pass|fail|inconclusive


def env_list(name: str) -> list[str]:
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]


def run_all(probes: dict[str, Callable[[], Result]]) -> dict[str, dict[str, str]]:
    out = {}
    for name, probe in probes.items():
        try:
            status, detail = probe()
        except Exception as exc:  # a probe that breaks proves nothing either way
            status, detail = "inconclusive", type(exc).__name__
        out[name] = {"status": status, "detail": detail}
    return out
