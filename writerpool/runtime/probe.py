"""Running the acceptance harness uncontained (the isolation control's side)."""

from __future__ import annotations

import sys
from pathlib import Path

from writerpool.proc import CommandFailed, clean_env, run


def run_harness_on_host(program: Path, env: dict[str, str], cwd: Path) -> bytes:
    """Run the harness as this user, with no containment; return its stdout."""
    try:
        done = run(
            [sys.executable, str(program)], cwd=cwd, env=clean_env(env), timeout=60, check=False
        )
    except CommandFailed:
        return b""
    return done.stdout
