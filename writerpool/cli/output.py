"""Shared CLI plumbing: the --json flag, rendering a Report, the exit code."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from writerpool.report import Report

F = TypeVar("F", bound=Callable[..., Any])


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print a versioned JSON report.")(
        func
    )


def emit(report: Report, as_json: bool, exit_code: int | None = None) -> None:
    """Print the report and leave with its exit code (or the one given)."""
    click.echo(report.render_json() if as_json else report.render_text())
    raise SystemExit(report.exit_code() if exit_code is None else exit_code)


def terminal_steps(line: str) -> None:
    """Progress lines on stderr, only when a person watches it."""
    if sys.stderr.isatty():
        click.echo(f"writerpool: {line}", err=True)
