"""`writerpool doctor [--json]`: exit 0 all ok, 1 warnings, 2 errors."""

from __future__ import annotations

import click

from writerpool.cli.output import json_option
from writerpool.config.paths import Paths
from writerpool.doctor import diagnose, exit_code
from writerpool.doctor.render import render_json, render_text


@click.command()
@json_option
def doctor(as_json: bool) -> None:
    """Check the host, Podman, the configuration and the writers directory.

    Exit status: 0 every check ok, 1 warnings only, 2 at least one error.
    """
    results = diagnose(Paths.from_env())
    click.echo(render_json(results) if as_json else render_text(results))
    raise SystemExit(exit_code(results))
