"""Shared CLI plumbing: the --json flag, rendering a Report, the exit code."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from writerpool.report import Report, sanitize

F = TypeVar("F", bound=Callable[..., Any])


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print a versioned JSON report.")(
        func
    )


class Emitted(SystemExit):
    """Leaving a command after its result was printed; main() audits `outcome`."""

    def __init__(self, exit_code: int, outcome: str) -> None:
        super().__init__(exit_code)
        self.outcome = outcome


def leave(exit_code: int, error_codes: list[str]) -> None:
    """Leave with exit_code; the audit outcome is the first error's code, else "ok"."""
    raise Emitted(exit_code, error_codes[0] if error_codes else "ok")


def emit(report: Report, as_json: bool, exit_code: int | None = None) -> None:
    """Print the report and leave with its exit code (or the one given)."""
    click.echo(report.render_json() if as_json else report.render_text())
    errors = [f.code for f in report.findings if f.status == "error"]
    leave(report.exit_code() if exit_code is None else exit_code, errors)


def terminal_steps(line: str) -> None:
    """Progress lines on stderr, only when a person watches it."""
    if sys.stderr.isatty():
        click.echo(f"writerpool: {line}", err=True)


# Pool modules whose notices an operator must see at once, tty or not (a lease wait).
NOTICE_LOGGERS = ("writerpool.pool.writer.lease",)


class _Notice(logging.Handler):
    """A notice as a `writerpool: …` line on the stderr of the moment."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"writerpool: {sanitize(record.getMessage())}", err=True)


def notices_on_stderr() -> None:
    """Show the pool's notices (what a command waits for) on stderr, once per process."""
    for name in NOTICE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(h, _Notice) for h in logger.handlers):
            logger.addHandler(_Notice(logging.WARNING))
            logger.propagate = False
