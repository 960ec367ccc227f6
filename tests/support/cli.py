"""The writerpool CLI run in this process: the same top-level handler and audit line as
`python -m writerpool` (writerpool/cli/main.py), without starting an interpreter."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass

from writerpool.cli.main import audit_command, run


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


def run_cli(*args: str) -> CliResult:
    """Run `writerpool ARGS` as main() does; a traceback on stderr fails the caller."""
    argv = list(args)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["writerpool", *argv]  # the lease records its holder's command line
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            outcome, status = run(argv)
            audit_command(argv, outcome)
    finally:
        sys.argv = saved
    assert "Traceback" not in err.getvalue(), err.getvalue()
    return CliResult(status, out.getvalue(), err.getvalue())
