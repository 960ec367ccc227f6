"""`writerpool writer …`: list and verify writers (lifecycle commands register here too)."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.listing import list_writers, verify_writer
from writerpool.runtime.podman import Podman


@click.group()
def writer() -> None:
    """Inspect and manage writers."""


@writer.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """Each writer with its phase, readiness and reason."""
    paths = Paths.from_env()
    emit(list_writers(paths, Podman(), load_config(paths)), as_json)


@writer.command("verify")
@click.argument("name")
@json_option
def verify_cmd(name: str, as_json: bool) -> None:
    """Doctor plus a bounded MCP handshake; starts no session."""
    paths = Paths.from_env()
    emit(verify_writer(paths, Podman(), load_config(paths), name), as_json)


# Lifecycle commands live in their own module; imported last so it can stay independent.
from writerpool.cli.lifecycle_cmd import (  # noqa: E402
    collect_cmd,
    finish_cmd,
    recreate_cmd,
    remove_cmd,
    reset_cmd,
)

writer.add_command(collect_cmd)
writer.add_command(reset_cmd)
writer.add_command(recreate_cmd)
writer.add_command(finish_cmd)
writer.add_command(remove_cmd)
