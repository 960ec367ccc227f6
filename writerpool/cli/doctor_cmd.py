"""`writerpool doctor [--json]`: exit 0 all ok, 1 warnings, 2 errors."""

from __future__ import annotations

import click

from writerpool.agent.install import registry_problem
from writerpool.cli.output import json_option, leave
from writerpool.config.paths import Paths
from writerpool.doctor import diagnose, exit_code
from writerpool.doctor.pool_service import service_settings
from writerpool.doctor.render import render_json, render_text
from writerpool.pool.status.checks import POOL_CHECKS
from writerpool.service.checks import service_port


@click.command()
@click.option(
    "--registry",
    is_flag=True,
    help="Also check that npm reaches its registry (uses the network; image build needs it).",
)
@json_option
def doctor(registry: bool, as_json: bool) -> None:
    """Check the host, Podman, the configuration and the writers directory.

    Exit status: 0 every check ok, 1 warnings only, 2 at least one error.
    """
    # Checks doctor does not own: the pool's, and the pool service's settings and port.
    extra = (*POOL_CHECKS, service_settings, service_port)
    results = diagnose(Paths.from_env(), registry_problem if registry else None, extra, hosts=True)
    click.echo(render_json(results) if as_json else render_text(results))
    leave(exit_code(results), [r.id for r in results if r.severity == "error"])
