"""`writerpool register TARGET`: the host server's registration in Claude Code or Codex."""

from __future__ import annotations

import shlex
from dataclasses import replace

import click

from writerpool.cli.output import json_option, leave
from writerpool.clients import apply, http, parse_target, plan, remove, verify
from writerpool.clients.model import Target
from writerpool.config.paths import Paths
from writerpool.errors import UsageError
from writerpool.report import Report
from writerpool.service import control


@click.command()
@click.argument("target", metavar="TARGET")
@click.option("--apply", "do_apply", is_flag=True, help="Add the registration with the client.")
@click.option("--verify", "do_verify", is_flag=True, help="Check it and run an MCP handshake.")
@click.option("--remove", "do_remove", is_flag=True, help="Remove what writerpool added.")
@click.option(
    "--project",
    metavar="DIR",
    help="The project directory (claude-code:project and claude-code:local only).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=30.0,
    show_default=True,
    help="Deadline of the --verify handshake, in seconds.",
)
@click.option(
    "--approve-prompts",
    is_flag=True,
    help="Codex: approve pi_session_prompt, so `codex exec` can prompt sessions unasked.",
)
@click.option(
    "--http",
    "over_http",
    is_flag=True,
    help="Register the pool service's URL with a token of the client's own (starts it).",
)
@json_option
def register(
    target: str,
    do_apply: bool,
    do_verify: bool,
    do_remove: bool,
    project: str | None,
    timeout: float,
    approve_prompts: bool,
    over_http: bool,
    as_json: bool,
) -> None:
    """Register `writerpool serve` with a coding client (plans unless told otherwise).

    TARGET is one of: claude-code:user, claude-code:project, claude-code:local,
    codex:user. Changes go through the client's own `mcp add` / `mcp remove`; for
    Codex, writerpool then sets its entry's required startup, timeouts and env_vars,
    and with --approve-prompts approves pi_session_prompt (Codex otherwise asks before
    each prompt, and `codex exec`, whose approval policy is never, refuses it).
    """
    if sum((do_apply, do_verify, do_remove)) > 1:
        raise UsageError("choose at most one of --apply, --verify, --remove")
    chosen = parse_target(target, project)
    if approve_prompts:
        if chosen.client != "codex" or do_remove:
            raise UsageError("--approve-prompts applies to codex:user, without --remove")
        chosen = replace(chosen, approve_prompts=True)
    paths = Paths.from_env()
    if over_http:
        _emit(_http(paths, chosen, do_apply, do_verify, do_remove), as_json)
    if do_apply:
        report = apply(paths, chosen)
    elif do_remove:
        report = remove(paths, chosen)
    elif do_verify:
        # Loaded here so the other actions do not pay for the MCP SDK.
        from writerpool.mcp.handshake import handshake, server_env  # noqa: PLC0415

        report = verify(paths, chosen, handshake, server_env, timeout)
    else:
        report = plan(paths, chosen)
    _emit(report, as_json)


def _http(paths: Paths, chosen: Target, do_apply: bool, do_verify: bool, do_remove: bool) -> Report:
    if do_verify:
        raise UsageError("--http takes --apply or --remove; `service status` checks the service")
    if do_apply:
        return http.apply(paths, chosen, lambda: str(control.start(paths).data["url"]))
    if do_remove:
        return http.remove(paths, chosen)
    return http.plan(paths, chosen)


def _emit(report: Report, as_json: bool) -> None:
    """The report, and in text the exact client command line planned or run."""
    if as_json:
        click.echo(report.render_json())
    else:
        lines = [report.render_text()]
        for finding in report.findings:
            argv = finding.data.get("argv")
            if isinstance(argv, list):
                where = f"   (in {finding.data['cwd']})" if "cwd" in finding.data else ""
                lines.append(f"       $ {shlex.join(str(a) for a in argv)}{where}")
        click.echo("\n".join(lines))
    leave(report.exit_code(), [f.code for f in report.findings if f.status == "error"])
