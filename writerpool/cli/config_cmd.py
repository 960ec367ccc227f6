"""`writerpool config init|show`."""

from __future__ import annotations

import click

from writerpool.atomic import write_atomic
from writerpool.cli.output import emit, json_option
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.config.starter import STARTER
from writerpool.report import Report


@click.group()
def config() -> None:
    """Create and check the configuration file."""


@config.command("init")
@json_option
def init(as_json: bool) -> None:
    """Write a commented starter config.toml (never overwrites)."""
    paths = Paths.from_env()
    report = Report("config init", data={"configFile": str(paths.config_file)})
    if paths.config_file.exists():
        report.add("config_exists", "error", "config", "a configuration file already exists")
    else:
        write_atomic(paths.config_file, STARTER.encode(), mode=0o600)
        report.add("config_written", "ok", "config", "starter configuration written")
    _where(paths, as_json)
    emit(report, as_json)


def _where(paths: Paths, as_json: bool) -> None:
    """The file's location for the operator (findings carry no paths; JSON has it in
    data.configFile)."""
    if not as_json:
        click.echo(f"configuration file: {paths.config_file}")


@config.command("check")
@json_option
def check(as_json: bool) -> None:
    """Validate the configuration and print its fingerprint."""
    paths = Paths.from_env()
    _where(paths, as_json)
    loaded = load_config(paths)
    data = {"fingerprint": loaded.fingerprint, "configFile": str(paths.config_file)}
    report = Report("config check", data=data)
    report.add("config_valid", "ok", "config", f"valid ({loaded.fingerprint[:19]}…)")
    emit(report, as_json)
