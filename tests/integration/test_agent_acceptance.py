"""A workspace whose profiles use pi, Claude Code and Codex, through the operator's
commands on real rootless Podman: acceptance renders each agent's directory behind the
session's proxy and the harness in the writer's container reports each agent's own
checks (no key in its files or command, its endpoint the forwarder and its token the
proxy's), the isolation control sees every agent's key check fail when the key is given
to the agent itself, and a profile whose agent changes makes the writer's verdict stale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_allow_acceptance import Recorded, finding
from tests.integration.writers_support import make_checkout, wp, write_config
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.accept import readiness
from writerpool.pool.acceptance.control import run_control
from writerpool.runtime.hosts import open_host
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

AGENTS = ("claude-code", "codex", "pi")
CHECKS = ("key_absent", "via_proxy")
PROFILES = """
[profiles.claude]
permission = "coding"
agent = "claude-code"
provider = "scripted"
model = "scripted-model"

[profiles.cx]
permission = "coding"
agent = "{codex}"
provider = "responses"
model = "scripted-model"

[providers.responses]
base_url = "http://127.0.0.1:9/v1"
api = "openai-responses"
"""


@pytest.fixture
def configured(tmp_path: Path, image_pin: Path) -> Path:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    write_config(checkout)
    _with_agents("codex")
    return checkout


def _with_agents(codex: str) -> None:
    config = Paths.from_env().config_file
    base = config.read_text().split("\n[profiles.claude]")[0]
    config.write_text(base + PROFILES.format(codex=codex))


def test_acceptance_proves_each_agent_of_the_workspaces_profiles(configured: Path) -> None:
    wp("control", "--apply", check=True)
    _, report = wp("mode", "set", "demo", "container", "--profiles", "code,claude,cx",
                   "--apply", check=True)  # fmt: skip
    accepted = finding(report, "writer_accepted")
    checks = accepted["data"]["agentChecks"]
    for name, status in sorted(checks.items()):
        print(f"agent check {name}: {status}")
    assert checks == {f"agent_{a}_{c}": "pass" for a in AGENTS for c in CHECKS}
    assert accepted["message"].endswith("; agents claude-code, codex, pi checked")
    # Codex's profile now runs pi: the agents acceptance proved are no longer the
    # profiles' (a fingerprint group), so the writer is stale until accepted again.
    _with_agents("pi")
    paths = Paths.from_env()
    state = load_state(paths.writer_dir("demo-w1"))
    assert state is not None and state.phase == "ready"
    config = load_config(paths).config
    assert readiness(paths, open_host(), state, config) == ("not_ready", "writer_acceptance_stale")
    _, report = wp("mode", "set", "demo", "container", "--profiles", "code,claude,cx",
                   "--apply", check=True)  # fmt: skip
    checks = finding(report, "writer_accepted")["data"]["agentChecks"]
    assert sorted(checks) == [f"agent_{a}_{c}" for a in ("claude-code", "pi") for c in CHECKS]


def test_the_control_sees_every_agents_key_check_fail_given_the_key() -> None:
    host = Recorded()
    report = run_control(Paths.from_env(), host)
    assert report.codes() == ["isolation_control_passed"]
    checks = json.loads(host.outputs[0])["checks"]
    for agent in AGENTS:
        check = checks[f"agent_{agent}_key_absent"]
        print(f"control agent_{agent}_key_absent: {check['status']} ({check['detail']})")
        assert check["status"] == "fail"
        assert "the canary credential is in" in check["detail"]
