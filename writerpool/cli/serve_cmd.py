"""`writerpool serve`: the host MCP server on stdio (one registration for every client)."""

from __future__ import annotations

import logging

import anyio
import click

from writerpool.cli.server_process import prepare_server_process
from writerpool.config.paths import Paths

log = logging.getLogger("writerpool.serve")


@click.command()
@click.option("-v", "--verbose", is_flag=True, help="Log session events to stderr.")
def serve(verbose: bool) -> None:
    """Serve the pi_* MCP tools over stdio until stdin closes.

    The configuration and execution modes are read once at start; restart the
    server to load changes. stdout carries MCP frames only; logs go to stderr.
    """
    prepare_server_process("writerpool serve", verbose)
    try:
        # Imported here so other commands do not pay for loading the MCP SDK.
        from writerpool.mcp.server import serve as run_server  # noqa: PLC0415

        anyio.run(run_server, Paths.from_env())
    except Exception:
        # The top-level handler prints its report on stdout, which belongs to the
        # protocol here: a client would read it as a corrupt frame. Report on stderr.
        log.exception("the server failed")
        raise SystemExit(3) from None
