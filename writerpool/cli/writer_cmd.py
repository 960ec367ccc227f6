"""`writerpool writer …`: list and verify writers (lifecycle commands register here too)."""

from __future__ import annotations

import click

from writerpool.cli.output import emit, json_option, leave
from writerpool.clients.model import server_command
from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.pool.collect.review import writer_diff, writer_log
from writerpool.pool.collect.review_list import writer_refs
from writerpool.pool.modes.gate import doctor_gate
from writerpool.pool.provision.listing import verify_writer
from writerpool.pool.provision.writer_host import writer_host
from writerpool.pool.status.writers import writer_statuses
from writerpool.report import Report
from writerpool.runtime.hosts import open_host


@click.group()
def writer() -> None:
    """Inspect and manage writers."""


@writer.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """Each writer with its phase, readiness and reason."""
    paths = Paths.from_env()
    # Every writer in the words of `writer status` (the session guard's judgement).
    emit(writer_statuses(paths, open_host(), load_config(paths), "writer list", None), as_json)


@writer.command("status")
@click.argument("name", required=False)
@json_option
def status_cmd(name: str | None, as_json: bool) -> None:
    """Per writer: whether a session would get it, why not, and the next command."""
    paths = Paths.from_env()
    emit(writer_statuses(paths, open_host(), load_config(paths), "writer status", name), as_json)


@writer.command("refs")
@click.argument("name")
@click.option("--prune", is_flag=True, help="Drop moved-aside and merged review refs.")
@click.option("--apply", is_flag=True, help="Do it; without this, only plan.")
@json_option
def refs_cmd(name: str, prune: bool, apply: bool, as_json: bool) -> None:
    """The writer's review refs in the checkout: current, moved aside, merged."""
    paths = Paths.from_env()
    emit(writer_refs(paths, load_config(paths), name, prune, apply), as_json)


@writer.command("log")
@click.argument("name")
@click.argument("branch", required=False)
@json_option
def log_cmd(name: str, branch: str | None, as_json: bool) -> None:
    """The agent's commits on BRANCH (default HEAD) that the base does not hold."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report, text = writer_log(paths, host, loaded, name, branch)
    _show(report, text, as_json)


@writer.command("diff")
@click.argument("name")
@click.argument("branch", required=False)
@click.option("--wip", is_flag=True, help="Uncommitted and untracked work against HEAD.")
@click.option("--stat", is_flag=True, help="Files and line counts only.")
@json_option
def diff_cmd(name: str, branch: str | None, wip: bool, stat: bool, as_json: bool) -> None:
    """The agent's changes on BRANCH (default HEAD) against the base, or its --wip."""
    paths = Paths.from_env()
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report, text = writer_diff(paths, host, loaded, name, branch, wip, stat)
    _show(report, text, as_json)


def _show(report: Report, text: str, as_json: bool) -> None:
    """JSON: the report; text: the review itself (already safe for a terminal)."""
    if as_json:
        emit(report, True)
    click.echo(text)
    leave(0, [])


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
    loaded = load_config(paths)
    with writer_host(paths, loaded, name) as host:
        report = verify_writer(paths, host, loaded, name)
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
