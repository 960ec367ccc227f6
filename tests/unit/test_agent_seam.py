"""The agent seam: a profile names its agent; where an agent may run; what pi renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from writerpool.agent.backends import backend_for, holds_credential, remove_credentials
from writerpool.agent.pi_backend import PI
from writerpool.config.models import Config, parse_config
from writerpool.config.modes import ContainerSettings, ExecutionModes, ModeEntry
from writerpool.errors import WriterpoolError
from writerpool.pool.modes.request import check_warm
from writerpool.sessions.placement import plan_session, profile_capabilities

CONFIG = """
[workspaces]
demo = "/srv/demo"
[providers.p]
base_url = "http://model.test/v1"
[profiles.review]
permission = "read-only"
provider = "p"
model = "m"
default = true
[profiles.code]
permission = "coding"
provider = "p"
model = "m"
[profiles.claude]
permission = "coding"
agent = "claude-code"
provider = "p"
model = "m"
[profiles.codex]
permission = "coding"
agent = "codex"
provider = "p"
model = "m"
"""


@pytest.fixture
def config() -> Config:
    return parse_config(CONFIG.encode())


def _modes(entry: ModeEntry) -> ExecutionModes:
    return ExecutionModes(workspaces={"demo": entry})


HOST = ModeEntry(mode="host", accept_host_writes=True)
CONTAINER = ModeEntry(
    mode="container",
    container=ContainerSettings(profiles=("code", "claude", "codex"), base="main"),
)


def test_a_profile_runs_pi_unless_it_names_another_agent(config: Config) -> None:
    assert config.profiles["code"].agent == "pi"
    assert config.profiles["claude"].agent == "claude-code"
    agents = {p["alias"]: p["agent"] for p in profile_capabilities(config)}
    assert agents == {"review": "pi", "code": "pi", "claude": "claude-code", "codex": "codex"}


def test_an_unknown_agent_is_a_configuration_error() -> None:
    with pytest.raises(WriterpoolError):
        parse_config(CONFIG.replace('"codex"', '"aider"', 1).encode())


@pytest.mark.parametrize("profile", ["claude", "codex"])
def test_host_mode_refuses_an_agent_other_than_pi(config: Config, profile: str) -> None:
    with pytest.raises(WriterpoolError) as caught:
        plan_session(config, _modes(HOST), "demo", profile, None)
    assert caught.value.code == "agent_host_refused"
    assert plan_session(config, _modes(HOST), "demo", "code", None).placement == "host"


@pytest.mark.parametrize("profile", ["claude", "codex"])
def test_container_mode_places_every_agent_in_a_writer(config: Config, profile: str) -> None:
    plan = plan_session(config, _modes(CONTAINER), "demo", profile, None)
    assert plan.placement == "container" and plan.profile.agent != "pi"


def test_warm_writers_need_a_profile_whose_agent_warms(config: Config) -> None:
    with pytest.raises(WriterpoolError) as caught:
        check_warm(config, ("claude", "codex"), 1)
    assert caught.value.code == "warm_agent_unsupported"
    check_warm(config, ("claude", "code"), 1)  # pi's profile is the one warmed
    check_warm(config, ("claude",), 0)


def test_pi_is_the_backend_of_pi(config: Config) -> None:
    assert backend_for("pi") is PI
    command = PI.container_command(config.profiles["code"], False, "/pi/agent", "/tmp/s")
    assert command[0] == "pi" and command[1:3] == ["--mode", "rpc"]


def test_pi_renders_a_token_and_every_backend_removes_it(config: Config, tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    PI.render(config, agent_dir, "p", True)
    assert not holds_credential(agent_dir)
    resolved = type("R", (), {"name": "p"})()
    PI.point_at_proxy(agent_dir, resolved, "http://127.0.0.1:41480/v1", "wpt-token")
    assert holds_credential(agent_dir)
    models = json.loads((agent_dir / "models.json").read_text())
    assert models["providers"]["p"]["baseUrl"] == "http://127.0.0.1:41480/v1"
    remove_credentials(agent_dir)
    assert not holds_credential(agent_dir)
    assert "wpt-token" not in (agent_dir / "models.json").read_text()
