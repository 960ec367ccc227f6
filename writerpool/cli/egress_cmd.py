"""`writerpool egress check ALIAS HOST[:PORT]`, `egress log WRITER`, `egress sets` and
`egress allow WRITER HOST[:PORT]`."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.modes import egress_allow, egress_view


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


@egress.command("allow")
@click.argument("name", metavar="WRITER")
@click.argument("target", metavar="HOST[:PORT]")
@click.option("--for", "duration", default=egress_allow.DEFAULT_FOR, show_default=True,
              help="How long the entry holds: 90s, 30m, 2h (1m to 24h).")  # fmt: skip
@json_option
def allow_cmd(name: str, target: str, duration: str, as_json: bool) -> None:
    """Let WRITER's running session reach HOST[:PORT] (http://HOST for plain HTTP) for a
    while: its live allowlist proxy takes the entry at its next decision; audited."""
    emit(egress_allow.allow(Paths.from_env(), name, target, duration), as_json)


@egress.command("sets")
@json_option
def sets_cmd(as_json: bool) -> None:
    """The sets an allowlist may name: the configuration's, and host-pip, host-uv and
    host-npm with the hosts they derive on this host now and where from."""
    emit(egress_view.set_report(load_config(Paths.from_env()).config), as_json)
