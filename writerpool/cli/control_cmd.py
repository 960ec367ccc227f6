"""`writerpool control [--host NAME] [--apply]`: the isolation control."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.control import control as run
from writerpool.runtime.host import LOCAL
from writerpool.runtime.hosts import WriterHosts


@click.command()
@click.option("--apply", is_flag=True, help="Plant canaries and run the control (default: plan).")
@click.option("--host", "host", metavar="NAME", help="Run it on the configured host NAME.")
@json_option
def control(apply: bool, host: str | None, as_json: bool) -> None:
    """Prove the acceptance harness sees escapes when run without containment."""
    paths = Paths.from_env()
    # This machine's control needs no configuration; another host's is its [hosts.NAME].
    configured = load_config(paths).config.hosts if host else {}
    with WriterHosts(configured) as hosts:
        emit(run(paths, hosts, host or LOCAL, apply), as_json)
