"""Registration planning without clients: targets, the exact client command lines, the
parsers fed outputs recorded from the real CLIs, and the ownership record."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest

from writerpool.clients import header, http
from writerpool.clients.adapters import (
    ClaudeCode,
    Codex,
    parse_claude_get,
    parse_codex_list,
)
from writerpool.clients.model import Registration, Target, parse_target, server_command
from writerpool.clients.ownership import (
    OwnershipRecord,
    entry_for,
    load_record,
    locked,
    record_file,
    store_record,
)
from writerpool.clients.registration import desired_registration
from writerpool.clients.uninstall import remove_registrations
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.mcp.handshake import EXPECTED_TOOLS
from writerpool.report import Report
from writerpool.sessions.contract.tools import TOOLS

# Recorded from `claude mcp get writerpool` of @anthropic-ai/claude-code 2.1.332, with
# servers added by `claude mcp add` in a throwaway HOME (health-check lines included).
CLAUDE_USER_FAILED = """\
writerpool:
  Scope: User config (available in all your projects)
  Status: \u2718 Failed to connect
  Issue: CONNECTION_CLOSED: Connection closed
  Type: stdio
  Command: /usr/bin/python3
  Args: -m writerpool serve
  Environment:
    WRITERPOOL_CONFIG=/x/c.toml
    Z=2

To remove this server, run: claude mcp remove writerpool -s user
"""
CLAUDE_USER_CONNECTED = """\
writerpool:
  Scope: User config (available in all your projects)
  Status: \u2714 Connected
  Type: stdio
  Command: /opt/wpvenv/bin/python3
  Args: -m writerpool serve
  Environment:
    WRITERPOOL_CONFIG=/tmp/h4/config.toml

To remove this server, run: claude mcp remove writerpool -s user
"""
CLAUDE_LOCAL = """\
writerpool:
  Scope: Local config (private to you in this project)
  Status: \u2718 Failed to connect
  Issue: CONNECTION_CLOSED: Connection closed
  Type: stdio
  Command: /bin/cat
  Args: a b
  Environment:
    WRITERPOOL_CONFIG=/x/c.toml

To remove this server, run: claude mcp remove writerpool -s local
"""
CLAUDE_PROJECT_PENDING = """\
writerpool:
  Scope: Project config (shared via .mcp.json)
  Status: \u23f8 Pending approval (run `claude` to approve)
  Type: stdio
  Command: /usr/bin/python3
  Args: -m writerpool serve
  Environment:
    WRITERPOOL_CONFIG=/srv/wp/config.toml

To remove this server, run: claude mcp remove writerpool -s project
"""
CLAUDE_HTTP = """\
writerpool:
  Scope: User config (available in all your projects)
  Status: \u2718 Failed to connect
  Issue: ECONNREFUSED: Unable to connect. Is the computer able to access the url?
  Type: http
  URL: http://127.0.0.1:9/mcp

To remove this server, run: claude mcp remove writerpool -s user
"""
CLAUDE_NO_ARGS = """\
writerpool:
  Scope: User config (available in all your projects)
  Status: \u2718 Failed to connect
  Issue: CONNECTION_CLOSED: Connection closed
  Type: stdio
  Command: /bin/true
  Args:
  Environment:

To remove this server, run: claude mcp remove writerpool -s user
"""
# Recorded from `codex mcp list --json` of @openai/codex 0.171.0.
CODEX_LIST = """\
[
  {"name": "web", "enabled": true, "disabled_reason": null,
   "transport": {"type": "streamable_http", "url": "http://127.0.0.1:9/mcp",
     "bearer_token_env_var": null, "http_headers": null, "env_http_headers": null,
     "http_headers_helper": null},
   "startup_timeout_sec": null, "tool_timeout_sec": null, "auth_status": "unknown"},
  {"name": "writerpool", "enabled": true, "disabled_reason": null,
   "transport": {"type": "stdio", "command": "/usr/bin/python3",
     "args": ["-m", "writerpool", "serve"],
     "env": {"WRITERPOOL_CONFIG": "/srv/wp/config.toml"}, "env_vars": [], "cwd": null},
   "startup_timeout_sec": null, "tool_timeout_sec": null, "auth_status": "unsupported"}
]
"""
SERVE = ("-m", "writerpool", "serve")


def test_claude_get_outputs_parse_into_scope_command_and_environment() -> None:
    failed = parse_claude_get(CLAUDE_USER_FAILED)
    assert failed.scope == "user"
    assert failed.registration == Registration(
        "/usr/bin/python3", SERVE, {"WRITERPOOL_CONFIG": "/x/c.toml", "Z": "2"}
    )
    connected = parse_claude_get(CLAUDE_USER_CONNECTED)
    assert connected.registration is not None
    assert connected.registration.env == {"WRITERPOOL_CONFIG": "/tmp/h4/config.toml"}
    assert parse_claude_get(CLAUDE_LOCAL).scope == "local"
    pending = parse_claude_get(CLAUDE_PROJECT_PENDING)
    assert pending.scope == "project" and pending.registration is not None
    http = parse_claude_get(CLAUDE_HTTP)
    assert http.kind == "http" and http.registration == Registration(url="http://127.0.0.1:9/mcp")
    assert parse_claude_get(CLAUDE_NO_ARGS).registration == Registration("/bin/true", (), {})


def test_claude_output_of_an_unknown_form_is_a_client_failure() -> None:
    with pytest.raises(WriterpoolError) as caught:
        parse_claude_get("writerpool:\n  something else entirely\n")
    assert caught.value.code == "client_failed"


def test_claude_compares_arguments_as_it_prints_them() -> None:
    claude = ClaudeCode()
    wanted = Registration("/usr/bin/python3", SERVE, {"WRITERPOOL_CONFIG": "/x/c.toml"})
    parsed = parse_claude_get(CLAUDE_USER_FAILED).registration
    assert parsed is not None
    # Same command and arguments, one extra variable: not what writerpool writes.
    assert not claude.same(parsed, wanted)
    assert claude.same(
        Registration(parsed.command, parsed.args, {"WRITERPOOL_CONFIG": "/x/c.toml"}), wanted
    )
    assert not claude.same(Registration("/usr/bin/python3", ("-m", "other"), wanted.env), wanted)


def test_codex_list_finds_the_entry_and_ignores_others() -> None:
    observed = parse_codex_list(CODEX_LIST)
    assert observed is not None and observed.scope == "user"
    # What `codex mcp list` shows of the settings comes along (env_vars here).
    assert observed.registration == Registration(
        "/usr/bin/python3", SERVE, {"WRITERPOOL_CONFIG": "/srv/wp/config.toml"}, {"env_vars": []}
    )
    assert parse_codex_list("[]") is None
    entries = json.loads(CODEX_LIST)
    entries[1]["transport"] = entries[0]["transport"]
    url_server = parse_codex_list(json.dumps(entries))
    assert url_server is not None and url_server.kind == "http"
    assert url_server.registration == Registration(url="http://127.0.0.1:9/mcp")
    # A URL that carries credentials of its own is not one writerpool writes.
    entries[1]["transport"]["bearer_token_env_var"] = "SOME_TOKEN"
    with_token = parse_codex_list(json.dumps(entries))
    assert with_token is not None and with_token.registration is None
    entries = json.loads(CODEX_LIST)
    entries = json.loads(CODEX_LIST)
    entries[1]["transport"]["cwd"] = "/somewhere"
    with_cwd = parse_codex_list(json.dumps(entries))
    assert with_cwd is not None and with_cwd.registration is None
    with pytest.raises(WriterpoolError):
        parse_codex_list("WARNING: not json")


def test_client_command_lines_are_exact() -> None:
    wanted = Registration("/venv/bin/python", SERVE, {"WRITERPOOL_CONFIG": "/cfg/config.toml"})
    user = Target("claude-code", "user")
    assert ClaudeCode().add_args(user, wanted) == [
        "mcp", "add", "--scope", "user", "writerpool",
        "-e", "WRITERPOOL_CONFIG=/cfg/config.toml",
        "--", "/venv/bin/python", "-m", "writerpool", "serve",
    ]  # fmt: skip
    local = Target("claude-code", "local", Path("/p"))
    assert ClaudeCode().remove_args(local) == ["mcp", "remove", "--scope", "local", "writerpool"]
    codex = Target("codex", "user")
    assert Codex().add_args(codex, wanted) == [
        "mcp", "add", "writerpool", "--env", "WRITERPOOL_CONFIG=/cfg/config.toml",
        "--", "/venv/bin/python", "-m", "writerpool", "serve",
    ]  # fmt: skip
    assert Codex().remove_args(codex) == ["mcp", "remove", "writerpool"]


def test_http_registrations_put_no_secret_on_the_command_line(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    url = "http://127.0.0.1:41234/mcp"
    claude, codex = Target("claude-code", "user"), Target("codex", "user")
    wanted = http.desired(paths, claude, url)
    assert ClaudeCode().add_args(claude, wanted) == [
        "mcp", "add-json", "--scope", "user", "writerpool", "-",
    ]  # fmt: skip
    entry = json.loads(ClaudeCode().add_stdin(wanted) or b"")
    assert entry == {"type": "http", "url": url, "headersHelper": wanted.helper}
    # The helper names the service's directory, the client and the URL: no token.
    assert shlex.split(str(wanted.helper)) == [
        server_command()[0], "-I", os.path.abspath(header.__file__),
        str(paths.state_dir / "service"), "claude-code", url,
    ]  # fmt: skip
    wanted = http.desired(paths, codex, url)
    assert Codex().add_args(codex, wanted) == ["mcp", "add", "writerpool", "--url", url]
    assert Codex().add_stdin(wanted) is None
    assert wanted.settings["http_headers_helper"] == http.helper_command(paths, codex, url)
    assert wanted.settings["required"] is True and "env_vars" not in wanted.settings


def test_desired_registration_carries_the_absolute_config_location(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WRITERPOOL_CONFIG", "relative/config.toml")
    wanted = desired_registration(Paths.from_env())
    assert wanted.command == sys.executable and Path(wanted.command).is_absolute()
    assert wanted.args == SERVE
    assert wanted.env == {"WRITERPOOL_CONFIG": str(tmp_path / "relative" / "config.toml")}


def test_targets_and_project_option_are_checked(tmp_path: Path) -> None:
    assert parse_target("codex:user", None) == Target("codex", "user")
    project = parse_target("claude-code:project", str(tmp_path))
    assert project.project == tmp_path.resolve()
    for text, option in (
        ("codex:project", None),
        ("claude-code", None),
        ("claude-code:user", str(tmp_path)),
        ("claude-code:local", None),
        ("claude-code:local", str(tmp_path / "missing")),
    ):
        with pytest.raises(UsageError):
            parse_target(text, option)


def test_ownership_record_is_private_keyed_by_target_and_project(tmp_path: Path) -> None:
    paths = Paths.from_env()
    wanted = Registration("/venv/bin/python", SERVE, {"WRITERPOOL_CONFIG": "/c"})
    one = Target("claude-code", "local", tmp_path / "one")
    two = Target("claude-code", "local", tmp_path / "two")
    with locked(paths):
        record = load_record(paths)
        assert record == OwnershipRecord()
        record = record.with_entry(entry_for(one, "writerpool", wanted, "pending"))
        record = record.with_entry(entry_for(two, "writerpool", wanted, "applied"))
        record = record.with_entry(entry_for(one, "writerpool", wanted, "applied"))
        store_record(paths, record)
    loaded = load_record(paths)
    assert len(loaded.registrations) == 2
    entry = loaded.find(one)
    assert entry is not None and entry.status == "applied"
    assert entry.registration() == wanted
    assert loaded.without(one).find(one) is None and loaded.without(one).find(two) is not None
    assert stat.S_IMODE(record_file(paths).stat().st_mode) == 0o600
    assert stat.S_IMODE(record_file(paths).parent.stat().st_mode) == 0o700


def test_unreadable_ownership_record_refuses(tmp_path: Path) -> None:
    paths = Paths.from_env()
    record_file(paths).parent.mkdir(parents=True)
    record_file(paths).write_text('{"schema_version": 1, "registrations": [{"target": 1}]}')
    with pytest.raises(WriterpoolError) as caught:
        load_record(paths)
    assert caught.value.code == "ownership_unavailable"
    record_file(paths).unlink()
    record_file(paths).symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(WriterpoolError):
        load_record(paths)


def test_uninstall_plans_each_recorded_registration_and_warns_on_an_unreadable_record(
    tmp_path: Path,
) -> None:
    paths = Paths.from_env()
    wanted = Registration("/venv/bin/python", SERVE, {"WRITERPOOL_CONFIG": "/c"})
    ours = Target("claude-code", "local", tmp_path / "ours")
    store_record(
        paths, OwnershipRecord().with_entry(entry_for(ours, "writerpool", wanted, "applied"))
    )
    plan = Report("uninstall")
    remove_registrations(paths, False, plan)
    assert [(f.code, f.target) for f in plan.findings] == [
        ("uninstall_planned", "client/claude-code:local")
    ]
    record_file(paths).write_text("{not json")
    unreadable = Report("uninstall")
    remove_registrations(paths, True, unreadable)
    assert [(f.code, f.status) for f in unreadable.findings] == [
        ("ownership_unavailable", "warning")
    ]


def test_handshake_expects_exactly_the_served_tools() -> None:
    assert frozenset(spec.name for spec in TOOLS) == EXPECTED_TOOLS
    assert len(EXPECTED_TOOLS) == 8 and all(name.startswith("pi_") for name in EXPECTED_TOOLS)
