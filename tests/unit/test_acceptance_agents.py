"""Acceptance renders each agent a writer's profiles use as a session renders it, behind
the session's proxy with the canary as the key behind it; the harness's per-agent checks
(payload/harness/agents.py), run here on exactly what the host received, find no key in
any agent's files and the proxy taking the token each presents. Given the key directly
(the isolation control's directory) every agent's key check fails; the set of agents is
a fingerprint group."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.memhost import MemoryHost
from writerpool.config.models import Config, Pool, Profile
from writerpool.config.paths import Paths
from writerpool.payload.harness import agents as harness
from writerpool.pool.acceptance.accept import accept, fingerprint_groups
from writerpool.pool.acceptance.agents import given_directly, reached_provider
from writerpool.pool.acceptance.control import ControlRecord, harness_digest, save_control
from writerpool.pool.acceptance.peers import PROVIDER_ANSWER, provider_listener
from writerpool.pool.writer.container import writer_of
from writerpool.state.writer import BaseRecord, WriterState, now, save_state

IMAGE = "c" * 64
AGENTS = ["claude-code", "codex", "pi"]
CANARY = "wp" + "canary-" + "1" * 32


def _config(agents: dict[str, str]) -> Config:
    profiles = {"review": Profile(permission="read-only", provider="anthropic", model="m",
                                  default=True)}  # fmt: skip
    for name, agent in agents.items():
        profiles[name] = Profile.model_validate(
            {"permission": "coding", "agent": agent, "provider": "anthropic", "model": "m"}
        )
    return Config(pool=Pool(), profiles=profiles)


THREE = {"code": "pi", "claude": "claude-code", "cx": "codex", "code2": "pi"}


def _writer(paths: Paths, host: MemoryHost) -> WriterState:
    fields = {
        "name": "ag-w1", "alias": "ag", "settings_digest": "sha256:" + "0" * 64,
        "image": IMAGE, "network": "provider", "cache": "none", "lifecycle": "keep",
        "tags": "none", "profiles": list(THREE), "host": host.name,
        "base": BaseRecord(name="main", ref="refs/heads/main", commit="a" * 40, branch="main"),
    }  # fmt: skip
    state = save_state(paths.writer_dir("ag-w1"), WriterState.model_validate(fields))
    host.create_storage(writer_of(paths, state), cache=False, adopt=False)
    save_control(paths, ControlRecord(passed=True, at=now(), harness_digest=harness_digest()),
                 host.name)  # fmt: skip
    return state


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """A stand-in for the session's proxy socket: it refuses any key but the token it is
    given (list[0]) as the real proxy does, and takes that one."""
    path, token = tmp_path / "proxy.sock", [""]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                head = conn.recv(4096)
                good = f"Bearer {token[0]}\r\n".encode() in head and token[0]
                conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + PROVIDER_ANSWER
                             if good else b"HTTP/1.1 403 Forbidden\r\n\r\n"
                             + harness.TOKEN_REFUSED)  # fmt: skip

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, token
    server.close()


def test_each_agent_is_rendered_behind_the_proxy_and_holds_no_key(
    tmp_path: Path, proxy: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, host = Paths.from_env(), MemoryHost("th", images=(IMAGE,))
    config = _config(THREE)
    state = _writer(paths, host)
    accept(paths, host, state, config)  # nothing runs in memory: the host keeps the spec
    [(spec, _)] = host.ran
    commands = json.loads(spec.env["WRITERPOOL_HARNESS_AGENTS"])
    assert sorted(commands) == AGENTS  # each distinct agent once
    assert spec.env["WRITERPOOL_HARNESS_AGENT_DIR"] == "/pi/agent"
    # What the writer's host received as its agent directory, written out as mounted.
    root = tmp_path / "agent"
    for rel, data in host.agent_files[state.name].items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    token = (root / "claude" / "key").read_text()
    assert token and token == (root / "codex" / "key").read_text()
    socket_path, accepted = proxy
    monkeypatch.setenv("WRITERPOOL_HARNESS_CANARY", "scan")
    monkeypatch.setenv("WRITERPOOL_EGRESS_SOCKET", str(socket_path))
    monkeypatch.setenv("WRITERPOOL_EGRESS_PORT", "41480")
    for agent in AGENTS:
        assert harness.key_absent(str(root), agent, commands[agent])[0] == "pass", agent
        # The proxy refuses the token it does not know, takes the session's.
        assert harness.via_proxy(str(root), agent)[0] == "fail", agent
    accepted[0] = token
    for agent in AGENTS:
        status, detail = harness.via_proxy(str(root), agent)
        assert (status, detail.endswith("its request reached the provider")) == ("pass", True)
    # The canary in one agent's files, or in its command, fails that agent alone.
    (root / "codex" / "key").write_text(CANARY)
    assert harness.key_absent(str(root), "codex", commands["codex"])[0] == "fail"
    assert harness.key_absent(str(root), "pi", commands["pi"])[0] == "pass"
    assert harness.key_absent(str(root), "pi", [*commands["pi"], f"K={CANARY}"])[0] == "fail"


def test_given_the_key_directly_every_agents_key_check_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = given_directly(CANARY)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WRITERPOOL_HARNESS_WORK", str(tmp_path))
    checks = {name: check() for name, check in harness.agent_checks().items()}
    absent = {n: r for n, r in checks.items() if n.endswith("_key_absent")}
    assert sorted(absent) == [f"agent_{a}_key_absent" for a in AGENTS]
    assert {r[0] for r in absent.values()} == {"fail"}, absent


def test_the_agents_of_the_profiles_are_a_fingerprint_group() -> None:
    paths, host = Paths.from_env(), MemoryHost("th", images=(IMAGE,))
    state = _writer(paths, host)
    groups = fingerprint_groups(paths, host, state, _config(THREE))
    assert groups["agents"] == "claude-code,codex,pi"
    changed = fingerprint_groups(paths, host, state, _config({**THREE, "cx": "pi"}))
    assert {k for k in groups if groups[k] != changed[k]} == {"agents"}


def test_the_provider_counts_an_agent_only_when_its_request_brought_the_canary() -> None:
    with provider_listener() as (port, arrived):
        for key, agent in ((CANARY, "codex"), ("session-token", "pi"), (CANARY, "claude-code")):
            body = json.dumps({"model": "writerpool-acceptance", "input": agent}).encode()
            head = (f"POST /v1/responses HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {key}"
                    f"\r\nContent-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
            with socket.create_connection(("127.0.0.1", port), 5) as conn:
                conn.sendall(head + body)
                assert PROVIDER_ANSWER in conn.recv(4096)
    # pi's request came with a token, not the key the proxy puts in: not through it.
    assert reached_provider(arrived, CANARY) == {"codex", "claude-code"}


def test_unusable_agent_files_make_the_agent_checks_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WRITERPOOL_HARNESS_AGENTS", json.dumps({"pi": ["pi"]}))
    monkeypatch.setenv("WRITERPOOL_HARNESS_AGENT_FILES", "not json")
    monkeypatch.setenv("WRITERPOOL_HARNESS_WORK", str(tmp_path))
    checks = {name: check() for name, check in harness.agent_checks().items()}
    assert sorted(checks) == ["agent_pi_key_absent", "agent_pi_via_proxy"]
    assert {status for status, _ in checks.values()} == {"inconclusive"}
