"""`writerpool register TARGET`: the host server's registration in Claude Code or Codex."""

from __future__ import annotations

import shlex
from dataclasses import replace

import click

from writerpool.cli.output import json_option, leave
from writerpool.clients import Checks, apply, parse_target, plan, remove, verify
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
    help="Plan or apply the pool service's URL instead of `writerpool serve` (starts the "
    "service; the client's token stays with writerpool). --verify and --remove read the "
    "transport from the record.",
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
    With --http, the pool service's URL and writerpool's header helper instead.
    """
    if sum((do_apply, do_verify, do_remove)) > 1:
        raise UsageError("choose at most one of --apply, --verify, --remove")
    chosen = parse_target(target, project)
    if over_http and chosen.scope == "project" and not (do_verify or do_remove):
        # Its .mcp.json is shared with the repository; the helper names this account's paths.
        raise UsageError("--http registers in the user or local scope, not the shared project")
    if approve_prompts:
        if chosen.client != "codex" or do_remove:
            raise UsageError("--approve-prompts applies to codex:user, without --remove")
        chosen = replace(chosen, approve_prompts=True)
    paths = Paths.from_env()
    if do_apply:
        # The service is above the clients: its start is passed in.
        report = apply(paths, chosen, start_service=control.start if over_http else None)
    elif do_remove:
        report = remove(paths, chosen)
    elif do_verify:
        # Loaded here so the other actions do not pay for the MCP SDK.
        from writerpool.mcp.handshake import handshake, http_handshake, server_env  # noqa: PLC0415

        report = verify(paths, chosen, Checks(handshake, server_env, http_handshake), timeout)
    else:
        report = plan(paths, chosen, over_http=over_http)
    _emit(report, as_json)


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
                if "stdin" in finding.data:  # what that command reads (no secret in it)
                    lines.append(f"         with on its standard input: {finding.data['stdin']}")
        click.echo("\n".join(lines))
    leave(report.exit_code(), [f.code for f in report.findings if f.status == "error"])
