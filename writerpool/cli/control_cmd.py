"""`writerpool control [--apply]`: the isolation control."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.config.paths import Paths
from writerpool.pool.control import run_control
from writerpool.pool.control_remote import run_host_control


@click.command()
@click.option("--apply", is_flag=True, help="Plant canaries and run the control (default: plan).")
@click.option("--host", "host", metavar="NAME", help="Run it on the configured host NAME.")
@json_option
def control(apply: bool, host: str | None, as_json: bool) -> None:
    """Prove the acceptance harness sees escapes when run without containment."""
    paths = Paths.from_env()
    emit(run_host_control(paths, host, apply) if host else run_control(paths, apply), as_json)
