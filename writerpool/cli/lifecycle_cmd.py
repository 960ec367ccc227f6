"""`writerpool writer collect|reset|recreate|finish|remove`: parse, call the pool, render."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option, terminal_steps
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.collect.export import collect
from writerpool.pool.lifecycle import actions as lifecycle
from writerpool.pool.provision.writer_host import writer_host

apply_option = click.option("--apply", is_flag=True, help="Do it; without this, only plan.")
discard_option = click.option(
    "--discard", is_flag=True, help="Allow losing work that no complete collection covers."
)


@click.command("collect")
@click.argument("name")
@click.option(
    "--keep-old",
    is_flag=True,
    help="Leave earlier review refs in place (default: move overwritten ones aside).",
)
@apply_option
@json_option
def collect_cmd(name: str, keep_old: bool, apply: bool, as_json: bool) -> None:
    """Export the writer's changed branches and uncommitted work into the checkout."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report = collect(paths, host, loaded, name, apply, terminal_steps, keep_old)
    emit(report, as_json)


@click.command("reset")
@click.argument("name")
@click.option("--base", "base", metavar="BRANCH", help="Reset onto this branch of the checkout.")
@discard_option
@apply_option
@json_option
def reset_cmd(name: str, base: str | None, discard: bool, apply: bool, as_json: bool) -> None:
    """Put the writer's clone back on its base (or on --base)."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report = lifecycle.reset(paths, host, loaded, name, base, discard, apply)
    emit(report, as_json)


@click.command("recreate")
@click.argument("name")
@discard_option
@apply_option
@json_option
def recreate_cmd(name: str, discard: bool, apply: bool, as_json: bool) -> None:
    """Rebuild the writer's clone and agent directory on the workspace base."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report = lifecycle.recreate(paths, host, loaded, name, discard, apply)
    emit(report, as_json)


@click.command("finish")
@click.argument("name")
@apply_option
@json_option
def finish_cmd(name: str, apply: bool, as_json: bool) -> None:
    """Collect, then reset (persistent) or recreate (ephemeral) on the workspace base."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report = lifecycle.finish(paths, host, loaded, name, apply, terminal_steps)
    emit(report, as_json)


@click.command("remove")
@click.argument("name")
@discard_option
@apply_option
@json_option
def remove_cmd(name: str, discard: bool, apply: bool, as_json: bool) -> None:
    """Delete the writer and everything it owns (a plan until --apply)."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report = lifecycle.remove(paths, host, loaded, name, discard, apply)
    emit(report, as_json)
