"""`writerpool egress check ALIAS HOST[:PORT]` and `writerpool egress log WRITER`."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool import egress_view


@click.group()
def egress() -> None:
    """What a workspace's egress allowlist lets through, and what it decided."""


@egress.command("check")
@click.argument("alias")
@click.argument("target", metavar="HOST[:PORT]")
@json_option
def check_cmd(alias: str, target: str, as_json: bool) -> None:
    """Whether a writer of ALIAS may reach HOST[:PORT] (443 by default; http://HOST for
    plain HTTP), and by which allowlist entry."""
    paths = Paths.from_env()
    emit(egress_view.check(load_config(paths).config, paths, alias, target), as_json)


@egress.command("log")
@click.argument("name", metavar="WRITER")
@click.option("--limit", type=click.IntRange(1, 1000), default=egress_view.LOG_LINES,
              show_default=True, help="How many recent decisions to show.")  # fmt: skip
@json_option
def log_cmd(name: str, limit: int, as_json: bool) -> None:
    """The recent decisions of WRITER's allowlist proxy (allowed or denied, and why)."""
    emit(egress_view.log(Paths.from_env(), name, limit), as_json)
