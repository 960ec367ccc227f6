"""`writerpool writer …`: list and verify writers (lifecycle commands register here too)."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option
from writerpool.clients.model import server_command
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.pool.gate import doctor_gate
from writerpool.pool.listing import list_writers, verify_writer
from writerpool.report import Report
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
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=30.0,
    show_default=True,
    help="Deadline of the MCP handshake, in seconds.",
)
@json_option
def verify_cmd(name: str, timeout: float, as_json: bool) -> None:
    """Doctor plus a bounded MCP handshake; starts no session."""
    paths = Paths.from_env()
    report = verify_writer(paths, Podman(), load_config(paths), name)
    target = f"writer/{name.rsplit('-w', 1)[0]}/{name}"
    _doctor_findings(paths, name, report, target)
    _handshake_finding(paths, timeout, report, target)
    emit(report, as_json)


def _doctor_findings(paths: Paths, name: str, report: Report, target: str) -> None:
    """The blocking doctor failures that concern this writer's workspace and profiles."""
    alias = name.rsplit("-w", 1)[0]
    entry = load_modes(paths).workspaces.get(alias)
    settings = entry.container if entry is not None else None
    doctor_gate(
        paths,
        report,
        target,
        workspace=alias,
        profiles=settings.profiles if settings is not None else (),
        network=settings.network if settings is not None else None,
    )


def _handshake_finding(paths: Paths, timeout: float, report: Report, target: str) -> None:
    """The same `writerpool serve` and configuration a session's server uses; the
    handshake calls pi_capabilities_get only, so no session starts and no provider is
    called."""
    # Loaded here so `writer list` does not pay for the MCP SDK.
    from writerpool.mcp.handshake import handshake, server_env  # noqa: PLC0415

    command = server_command()
    outcome = handshake(command, server_env({"WRITERPOOL_CONFIG": str(paths.config_file)}), timeout)
    report.add(
        outcome.code,
        "ok" if outcome.ok else "error",
        target,
        outcome.message,
        tools=list(outcome.tools),
    )


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
