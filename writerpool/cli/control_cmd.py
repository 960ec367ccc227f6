"""`writerpool control [--apply]`: the isolation control."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.config.paths import Paths
from writerpool.pool.control import run_control


@click.command()
@click.option("--apply", is_flag=True, help="Plant canaries and run the control (default: plan).")
@json_option
def control(apply: bool, as_json: bool) -> None:
    """Prove the acceptance harness sees escapes when run without containment."""
    emit(run_control(Paths.from_env(), apply), as_json)
