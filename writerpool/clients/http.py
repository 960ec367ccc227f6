"""`register TARGET --http`: the client reaches the pool service's URL instead of
starting `writerpool serve`, with a token of its own that writerpool holds.

The token is never given to the client, nor put on any command line: the entry names
writerpool's header helper (clients/header.py), which the client runs before it
connects and which prints the `Authorization` header only while the service itself
listens at the URL. Claude Code: `claude mcp add-json --scope S writerpool -` with
`{"type": "http", "url": URL, "headersHelper": HELPER}` on standard input. Codex:
`codex mcp add writerpool --url URL`, then `http_headers_helper = HELPER` (and the
entry's other settings) in its config.toml, which `codex mcp add` cannot write.

The ownership record, `--verify` and `--remove` treat it as any registration
(clients/service.py); this module says what the registration is.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from writerpool.clients import codex_config, header
from writerpool.clients.model import SERVER_NAME, Registration, Target, server_command
from writerpool.clients.ownership import OwnershipRecord
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.report import Report
from writerpool.state import tokens
from writerpool.state.service_record import url_of

# What a plan shows while the service has never chosen its port.
UNCHOSEN_URL = url_of(0).replace(":0/", ":<port>/")


def client_name(target: Target) -> str:
    """The service's name for the client: its token and sessions are its own. Every
    scope of one client shares it (and its token, revoked with the last of them)."""
    return target.client


def helper_command(paths: Paths, target: Target, url: str) -> str:
    """The shell command line the client runs for its header: this interpreter in
    isolated mode on the helper's file, with the service's directory and the URL given
    explicitly (Codex runs it with HOME and PATH only). Paths and a URL: nothing secret."""
    argv = [server_command()[0], "-I", os.path.abspath(header.__file__),
            str(paths.service_dir), client_name(target), url]  # fmt: skip
    return shlex.join(argv)


def desired(paths: Paths, target: Target, url: str) -> Registration:
    helper = helper_command(paths, target, url)
    settings: dict[str, Any] = {}
    if target.client == "codex":
        settings = codex_config.http_settings(helper, target.approve_prompts)
    return Registration(url=url, helper=helper, settings=settings)


def exposure(report: Report, where: str, url: str) -> None:
    """What --http trades for reaching the service over TCP (docs/service.md)."""
    port = url.rsplit(":", 1)[1].split("/", 1)[0]
    report.add(
        "registration_exposure", "warning", where,
        f"over HTTP the client connects to 127.0.0.1:{port}, a port any local account can "
        "listen on while the service is down; the client then cannot reach writerpool "
        "(its header helper sends no token to a port the service does not hold) and "
        "`service start` refuses until the port is free. The default registration, "
        "without --http, has no port and needs no token (the client starts `writerpool "
        "serve`, which reaches the service through a Unix socket only this account can "
        "open)",
        remedy="register without --http unless the client speaks only HTTP",
    )  # fmt: skip


def hold_token(paths: Paths, target: Target) -> None:
    tokens.hold(paths, client_name(target))


def release_token(paths: Paths, record: OwnershipRecord, target: Target) -> bool:
    """Revoke the client's token unless another registration of the client still uses
    it (`record` holds the registrations left); whether it was revoked."""
    name = client_name(target)
    if any(e.url and e.target.startswith(f"{target.client}:") for e in record.registrations):
        return False
    try:
        tokens.revoke(paths, name)
    except WriterpoolError as exc:  # none, or revoked meanwhile by `service token revoke`
        if exc.code != "service_client_unknown":
            raise
        return False
    return True


def describe_plan(target: Target, url: str, label: str) -> str:
    known = url != UNCHOSEN_URL
    where = url if known else "the URL of the port the service chooses when it first starts"
    return (
        f"would start the pool service, give client {client_name(target)} a token that only "
        f"writerpool holds, and add {SERVER_NAME} to {label} at {where}"
    )
