"""`writerpool service start|stop|status|run` and `service token create|revoke NAME`."""

from __future__ import annotations

import anyio
import click

from writerpool.cli.output import emit, json_option
from writerpool.cli.server_process import prepare_server_process
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.report import Report
from writerpool.service import control
from writerpool.state import tokens


@click.group()
def service() -> None:
    """The pool service: one process per user serving MCP over HTTP on 127.0.0.1."""


@service.command("start")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help="Listen on this port from now on (0: any free one), and register writerpool's "
    "HTTP clients again at the new URL. Without it: the configured or recorded port.",
)
@json_option
def start_cmd(port: int | None, as_json: bool) -> None:
    """Start the service unless it runs; report its URL.

    It never moves to another port by itself: a recorded port that another program
    holds is refused (service_port_taken), naming who holds it.
    """
    paths = Paths.from_env()
    report = control.start(paths, port)
    if port is not None and not report.has_error():
        # Loaded here: the client adapters are needed only when the URL changed.
        from writerpool.clients.follow import follow_service  # noqa: PLC0415

        follow_service(paths, report)
    emit(report, as_json)


@service.command("stop")
@json_option
def stop_cmd(as_json: bool) -> None:
    """Stop the service: every session it hosts is closed first."""
    emit(control.stop(Paths.from_env()), as_json)


@service.command("status")
@json_option
def status_cmd(as_json: bool) -> None:
    """Whether the service runs, and its URL (`url` under --json).

    Exit status: 0 it runs, 1 it does not.
    """
    report = control.status(Paths.from_env())
    emit(report, as_json, exit_code=0 if report.data.get("running") else 1)


@service.command("run")
@click.option("-v", "--verbose", is_flag=True, help="Log session events to stderr.")
@click.option("--port", type=click.IntRange(0, 65535), hidden=True)
def run_cmd(verbose: bool, port: int | None) -> None:
    """Run the service in the foreground (what `service start` runs detached)."""
    from writerpool.service.app import run_service  # noqa: PLC0415 - loads the SDK

    prepare_server_process("writerpool service", verbose)
    paths = Paths.from_env()
    anyio.run(run_service, paths, load_config(paths).config.service.port, port)


@service.group("token")
def token() -> None:
    """Per-client bearer tokens."""


@token.command("create")
@click.argument("name")
@json_option
def token_create(name: str, as_json: bool) -> None:
    """A new token for client NAME (replacing its old one), printed once."""
    value = tokens.create(Paths.from_env(), name)
    report = Report("service token create")
    report.data.update({"client": name, "token": value})
    report.add("service_token_created", "ok", name, f"token for {name} (shown once): {value}")
    emit(report, as_json)


@token.command("revoke")
@click.argument("name")
@json_option
def token_revoke(name: str, as_json: bool) -> None:
    """Revoke client NAME's token: its next request is refused."""
    tokens.revoke(Paths.from_env(), name)
    report = Report("service token revoke")
    report.data["client"] = name
    report.add("service_token_revoked", "ok", name, f"revoked the token of {name}")
    emit(report, as_json)
