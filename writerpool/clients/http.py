"""`register TARGET --http`: the client reaches the pool service's URL with its own token
instead of starting `writerpool serve`.

Claude Code: `claude mcp add --transport http --scope S writerpool URL --header
"Authorization: Bearer TOKEN"`. Codex refuses inline tokens: `codex mcp add writerpool
--url URL --bearer-token-env-var WRITERPOOL_SERVICE_TOKEN`, and the user sets that
variable in the environment Codex starts from (the report says how, once).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from writerpool.clients import codex_config
from writerpool.clients.adapters import ClientAdapter, adapter_for
from writerpool.clients.model import SERVER_NAME, Target
from writerpool.config.paths import Paths
from writerpool.report import Report
from writerpool.state import tokens
from writerpool.state.service_record import running

TOKEN_ENV = "WRITERPOOL_SERVICE_TOKEN"  # noqa: S105 - a variable name
HIDDEN = "<token>"


def client_name(target: Target) -> str:
    """The service's name for the client: its tokens and sessions are its own."""
    return target.client


def add_args(target: Target, url: str, token: str) -> list[str]:
    if target.client == "codex":
        return ["mcp", "add", SERVER_NAME, "--url", url, "--bearer-token-env-var", TOKEN_ENV]
    header = f"Authorization: Bearer {token}"
    scope = ["--scope", target.scope]
    return ["mcp", "add", "--transport", "http", *scope, SERVER_NAME, url, "--header", header]


def _codex(target: Target) -> dict[str, Any]:
    """Codex's entry settings `mcp add` cannot write (as for stdio, less env_vars)."""
    settings: dict[str, Any] = {"required": True,
                                "tool_timeout_sec": codex_config.TOOL_TIMEOUT_SEC}  # fmt: skip
    if target.approve_prompts:
        settings["tools"] = codex_config.PROMPT_APPROVAL
    return settings


def _cwd(target: Target) -> Path:
    return target.project or Path.home()


def plan(paths: Paths, target: Target) -> Report:
    report = Report(f"register {target.name} --http")
    record = running(paths)
    url = str(record["url"]) if record else "http://127.0.0.1:<port>/mcp"
    report.add(
        "registration_planned", "planned", target.report_target,
        f"would start the service, create the token of client {client_name(target)} and "
        f"add {SERVER_NAME} at {url}",
        argv=adapter_for(target).cli.argv(add_args(target, url, HIDDEN)),
    )  # fmt: skip
    return report


def apply(paths: Paths, target: Target, service_url: Callable[[], str]) -> Report:
    """`service_url` starts the pool service unless it runs, and returns its URL (the
    service is above the clients: its caller passes it in)."""
    report = Report(f"register {target.name} --http --apply")
    adapter: ClientAdapter = adapter_for(target)
    adapter.cli.require()
    if adapter.read(target, _cwd(target)) is not None:
        report.add(
            "registration_divergent", "error", target.report_target,
            f"{SERVER_NAME} is already registered in {adapter.cli.label}; nothing was changed",
            remedy=f"remove it first (`writerpool register {target.name} --remove`)",
        )  # fmt: skip
        return report
    url = service_url()
    token = tokens.create(paths, client_name(target))
    args = add_args(target, url, token)
    done = adapter.cli.run(args, _cwd(target))
    if done.returncode != 0:
        tokens.revoke(paths, client_name(target))
        raise adapter.cli.fail(args, done)
    report.data.update({"url": url, "client": client_name(target)})
    report.add("registration_applied", "ok", target.report_target,
               f"added {SERVER_NAME} at {url} for client {client_name(target)}",
               argv=adapter.cli.argv(add_args(target, url, HIDDEN)))  # fmt: skip
    if target.client == "codex":
        codex_config.write_settings(codex_config.config_file(adapter.cli.env()), _codex(target))
        report.data.update({"token": token, "tokenEnv": TOKEN_ENV})
        report.add(
            "service_token_created", "ok", target.report_target,
            f"Codex reads its token from the variable {TOKEN_ENV}; set that variable in "
            f"the environment Codex starts from (your shell profile, say) to this token, "
            f"shown once: {token}",
        )  # fmt: skip
    return report


def remove(paths: Paths, target: Target) -> Report:
    report = Report(f"register {target.name} --http --remove")
    adapter = adapter_for(target)
    args = adapter.remove_args(target)
    if adapter.read(target, _cwd(target)) is not None:
        done = adapter.cli.run(args, _cwd(target))
        if done.returncode != 0:
            raise adapter.cli.fail(args, done)
    if client_name(target) in tokens.load(paths):
        tokens.revoke(paths, client_name(target))
    report.add("registration_removed", "ok", target.report_target,
               f"removed {SERVER_NAME} and revoked the token of {client_name(target)}")  # fmt: skip
    return report
