"""Per-client adapters: the exact add/remove command lines, and reading the current
registration back through the client's own CLI.

Claude Code: `claude mcp add --scope S NAME -e K=V -- CMD ARGS…`, or for the pool
service `claude mcp add-json --scope S NAME -` with the entry's JSON on standard input
(its URL and header helper), `claude mcp remove --scope S NAME`, read with `claude mcp
get NAME`, which prints text and health-checks an approved server (it starts the
registered command, or runs the header helper and connects, once; writerpool serve
starts no session for that). There is no read that skips the check.
Codex: `codex mcp add NAME --env K=V -- CMD ARGS…` or `codex mcp add NAME --url URL`,
then the entry's settings that the CLI cannot write (clients/codex_config.py), `codex
mcp remove NAME`, read with `codex mcp list --json`, which starts nothing, and the
config file for `required` and the header helper.
No secret is ever an argument: a client's command line is visible to every account.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from writerpool.clients import codex_config
from writerpool.clients.cli import ClientCli
from writerpool.clients.model import SERVER_NAME, Registration, Target
from writerpool.errors import WriterpoolError


@dataclass(frozen=True)
class Observed:
    """A registration named `writerpool` as the client reports it. `registration` is
    None when it is neither a stdio command nor a plain URL (an SSE server, or a URL
    with credentials of its own, say)."""

    scope: str
    registration: Registration | None
    kind: str = "stdio"
    # Claude Code's own health check of the entry, when it failed ("Issue: …" of `mcp
    # get`): for a URL, what it shows of the entry omits the header helper.
    failed: str | None = None


class ClientAdapter(Protocol):
    cli: ClientCli

    def add_args(self, target: Target, wanted: Registration) -> list[str]: ...

    def add_stdin(self, wanted: Registration) -> bytes | None: ...

    def remove_args(self, target: Target) -> list[str]: ...

    def read(self, target: Target, cwd: Path) -> Observed | None: ...

    def same(self, observed: Registration, wanted: Registration) -> bool: ...

    def problems(self, observed: Registration, wanted: Registration) -> list[str]: ...

    def configure(self, target: Target, wanted: Registration) -> None: ...


# -- Claude Code -------------------------------------------------------------------------

CLAUDE_SETTINGS = {
    # No telemetry, error reports or update checks from these calls: they need no network.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    # Bounds the health check `claude mcp get` runs (milliseconds).
    "MCP_TIMEOUT": "15000",
}
_CLAUDE_ABSENT = ("No MCP server named", "No MCP server found")
_CLAUDE_FIELDS = ("Scope", "Status", "Issue", "Type", "Command", "Args", "URL", "Environment")


def parse_claude_get(text: str) -> Observed:
    """Parse `claude mcp get NAME` output. Arguments come back joined by spaces, so a
    match compares them joined too (see ClaudeCode.same)."""
    fields: dict[str, str] = {}
    env: dict[str, str] = {}
    in_env = False
    for raw in text.splitlines():
        line = raw.strip()
        if in_env and raw.startswith("    ") and "=" in line:
            key, _, value = line.partition("=")
            env[key] = value
            continue
        in_env = False
        key, sep, value = line.partition(":")
        if not sep or key not in _CLAUDE_FIELDS:
            continue
        fields.setdefault(key, value.strip())
        in_env = key == "Environment"
    if "Scope" not in fields or "Type" not in fields:
        raise WriterpoolError("client_failed", "`claude mcp get` answered in an unknown form")
    scope = fields["Scope"].split(" ", 1)[0].lower() or "unknown"
    kind = fields["Type"].lower()
    if kind == "http" and fields.get("URL"):
        # The header helper is not shown; the health check ran it and says how it went.
        failed = None
        if "Failed" in fields.get("Status", ""):
            failed = fields.get("Issue") or fields["Status"]
        return Observed(scope, Registration(url=fields["URL"]), kind, failed)
    if kind != "stdio" or not fields.get("Command"):
        return Observed(scope, None, kind)
    args = tuple(fields.get("Args", "").split(" ")) if fields.get("Args") else ()
    return Observed(scope, Registration(fields["Command"], args, env), kind)


class ClaudeCode:
    def __init__(self) -> None:
        self.cli = ClientCli("claude", "Claude Code", CLAUDE_SETTINGS)

    def add_args(self, target: Target, wanted: Registration) -> list[str]:
        scope = ["--scope", target.scope]
        if wanted.kind == "http":
            return ["mcp", "add-json", *scope, SERVER_NAME, "-"]  # the JSON on stdin
        # -e takes several values: it must follow the name and end at `--`.
        env = [part for key, value in wanted.env.items() for part in ("-e", f"{key}={value}")]
        return ["mcp", "add", *scope, SERVER_NAME, *env, "--", wanted.command, *wanted.args]

    def add_stdin(self, wanted: Registration) -> bytes | None:
        if wanted.kind != "http":
            return None
        entry = {"type": "http", "url": wanted.url, "headersHelper": wanted.helper}
        return json.dumps(entry).encode()

    def remove_args(self, target: Target) -> list[str]:
        return ["mcp", "remove", "--scope", target.scope, SERVER_NAME]

    def read(self, target: Target, cwd: Path) -> Observed | None:
        args = ["mcp", "get", SERVER_NAME]
        done = self.cli.run(args, cwd)
        if done.returncode != 0:
            said = done.out + done.stderr.decode(errors="replace")
            if any(marker in said for marker in _CLAUDE_ABSENT):
                return None
            raise self.cli.fail(args, done)
        return parse_claude_get(done.out)

    def same(self, observed: Registration, wanted: Registration) -> bool:
        if observed.kind != wanted.kind:
            return False
        if wanted.kind == "http":
            return observed.url == wanted.url
        return (
            observed.command == wanted.command
            and " ".join(observed.args) == " ".join(wanted.args)
            and observed.env == wanted.env
        )

    def problems(self, observed: Registration, wanted: Registration) -> list[str]:
        return []  # Claude Code passes its own environment and waits for a server

    def configure(self, target: Target, wanted: Registration) -> None:
        return None


# -- Codex -------------------------------------------------------------------------------


def parse_codex_list(text: str, settings: dict[str, Any] | None = None) -> Observed | None:
    """Find NAME in `codex mcp list --json`. Tuning an operator may add later (enabled,
    env_vars, timeouts, tool filters) is not part of what writerpool compares."""
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise WriterpoolError("client_failed", "`codex mcp list --json` is not JSON") from exc
    if not isinstance(entries, list):
        raise WriterpoolError("client_failed", "`codex mcp list --json` is not a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == SERVER_NAME:
            return _codex_entry(entry, settings or {})
    return None


# A URL entry's own ways of sending credentials: writerpool's entry uses none of them.
_CODEX_CREDENTIALS = ("bearer_token_env_var", "http_headers", "env_http_headers")


def _codex_url(entry: dict[str, object], transport: dict[str, Any], settings: dict[str, Any]
               ) -> Observed:  # fmt: skip
    url = transport.get("url")
    if not isinstance(url, str) or any(transport.get(key) for key in _CODEX_CREDENTIALS):
        return Observed("user", None, "streamable_http with credentials of its own")
    shown = {k: entry[k] for k in ("startup_timeout_sec", "tool_timeout_sec")
             if entry.get(k) is not None}  # fmt: skip
    return Observed("user", Registration(url=url, settings={**settings, **shown}), "http")


def _codex_entry(entry: dict[str, object], settings: dict[str, Any]) -> Observed:
    transport = entry.get("transport")
    if not isinstance(transport, dict):
        raise WriterpoolError("client_failed", "a codex server entry has no transport")
    kind = str(transport.get("type", "unknown"))
    if kind == "streamable_http":
        return _codex_url(entry, transport, settings)
    command, args, env = transport.get("command"), transport.get("args"), transport.get("env")
    if kind != "stdio" or not isinstance(command, str) or transport.get("cwd") is not None:
        return Observed("user", None, kind if kind != "stdio" else "stdio with a directory")
    arg_list = tuple(str(a) for a in args) if isinstance(args, list) else ()
    env_map = {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}
    # What Codex reports wins over the file for the keys it shows (its view is what runs).
    shown: dict[str, object] = {
        k: entry[k] for k in ("startup_timeout_sec", "tool_timeout_sec") if k in entry
    }
    if isinstance(transport.get("env_vars"), list):
        shown["env_vars"] = [str(v) for v in transport["env_vars"]]
    merged = {**settings, **{k: v for k, v in shown.items() if v is not None}}
    return Observed("user", Registration(command, arg_list, env_map, merged))


class Codex:
    def __init__(self) -> None:
        self.cli = ClientCli("codex", "Codex")

    def config_path(self) -> Path:
        return codex_config.config_file(self.cli.env())

    def add_args(self, target: Target, wanted: Registration) -> list[str]:
        if wanted.kind == "http":
            # The header helper follows in the file: `codex mcp add` has no option for it.
            return ["mcp", "add", SERVER_NAME, "--url", str(wanted.url)]
        env = [part for key, value in wanted.env.items() for part in ("--env", f"{key}={value}")]
        return ["mcp", "add", SERVER_NAME, *env, "--", wanted.command, *wanted.args]

    def add_stdin(self, wanted: Registration) -> bytes | None:
        return None

    def remove_args(self, target: Target) -> list[str]:
        return ["mcp", "remove", SERVER_NAME]

    def read(self, target: Target, cwd: Path) -> Observed | None:
        args = ["mcp", "list", "--json"]
        done = self.cli.run(args, cwd)
        if done.returncode != 0:
            raise self.cli.fail(args, done)
        return parse_codex_list(done.out, codex_config.read_settings(self.config_path()))

    def same(self, observed: Registration, wanted: Registration) -> bool:
        """The entry writerpool would add; its settings are judged by problems()."""
        return (observed.kind, observed.url, observed.command, observed.args, observed.env) == (
            wanted.kind, wanted.url, wanted.command, wanted.args, wanted.env,
        )  # fmt: skip

    def problems(self, observed: Registration, wanted: Registration) -> list[str]:
        return codex_config.settings_problems(observed.settings, wanted.settings)

    def configure(self, target: Target, wanted: Registration) -> None:
        codex_config.write_settings(self.config_path(), wanted.settings)


def adapter_for(target: Target) -> ClientAdapter:
    return ClaudeCode() if target.client == "claude-code" else Codex()
