"""A real pi 0.73.1 whose provider is reached only through the forwarder and the proxy.

pi runs on the host here (the container path is the session tests'); its models.json
holds the forwarder's loopback URL and the session token, never the real key, and the
scripted provider sees the real key and never the token.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_pi_adapter import pi_bin  # noqa: F401 - a fixture
from writerpool.agent import launch
from writerpool.agent.environment import HOST, pi_env
from writerpool.agent.pi import PiAgent
from writerpool.agent.scripted import Script, ScriptedProvider
from writerpool.config.caps import Caps
from writerpool.config.models import Config, Profile, Provider
from writerpool.config.providers import resolve_provider
from writerpool.egress import model
from writerpool.egress.model import EgressRecord
from writerpool.egress.supervisor import EgressSupervisor
from writerpool.runtime.image import DEFAULT_IMAGES_DIR

pytestmark = pytest.mark.pi

MODEL = "scripted-model"
REAL_KEY = "sk-real-through-proxy"
SCRIPT = Script.model_validate(
    {
        "scripts": [
            {
                "match": "make a file",
                "steps": [
                    {
                        "tool_calls": [
                            {"name": "bash", "arguments": {"command": "echo made > made.txt"}}
                        ]
                    },
                    {"text": "I made the file."},
                ],
            },
        ]
    }
)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="egp", dir="/tmp"))
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", "--", str(path)], check=False)


def test_pi_works_through_the_forwarder_and_the_proxy_without_the_key(
    pi_bin: Path,  # noqa: F811
    short_dir: Path,
    tmp_path: Path,
) -> None:
    records: list[EgressRecord] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with ScriptedProvider(SCRIPT, host="127.0.0.1") as provider:
        config = Config(
            providers={
                "scripted": Provider(base_url=provider.base_url(), api_key_env="SCRIPTED_KEY")
            }
        )
        upstream = resolve_provider(config, "scripted")
        assert upstream is not None
        host = EgressSupervisor(audit=records.append)
        proxy = host.open(
            session="s1",
            writer="demo-w1",
            socket_path=short_dir / "egress.sock",
            upstream=upstream,
            credential=REAL_KEY,
            caps=Caps(requests=50, bytes_up=10**7, bytes_down=10**7, concurrent=4),
        )
        forwarder = subprocess.Popen(
            ["/usr/bin/python3", str(DEFAULT_IMAGES_DIR / "egress-forwarder"), "--background"],
            env={
                "PATH": os.environ["PATH"],
                "WRITERPOOL_EGRESS_PORT": str(port),
                "WRITERPOOL_EGRESS_SOCKET": str(proxy.socket_path),
            },
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        agent_dir, tmp, work = tmp_path / "agent", tmp_path / "tmp", tmp_path / "work"
        tmp.mkdir()
        work.mkdir()
        agent = None
        try:
            assert forwarder.wait(timeout=10) == 0
            endpoint = Provider(base_url=proxy.base_url(port))
            launch.render_agent_dir(agent_dir, "scripted", endpoint, False, [MODEL])
            launch.install_credential(agent_dir, "scripted", proxy.token)
            profile = Profile(permission="coding", provider="scripted", model=MODEL)
            args = launch.pi_args(profile, False, agent_dir, session_dir=tmp / "pi-sessions")
            argv = [str(pi_bin), *args]
            env = pi_env(agent_dir, HOST, tmpdir=tmp)
            agent = PiAgent.start(argv, env, work, ready_timeout=120)
            snap = agent.wait(agent.prompt("make a file please"), 120)
        finally:
            if agent is not None:
                agent.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(forwarder.pid, 15)
            host.close()
        assert snap.status == "completed" and snap.text == "I made the file."
        assert (work / "made.txt").read_text() == "made\n"
        assert provider.last_authorization == f"Bearer {REAL_KEY}"
        document = (agent_dir / "models.json").read_text()
        assert REAL_KEY not in document and proxy.token in document
        assert json.loads(document)["providers"]["scripted"]["baseUrl"].endswith(f":{port}/p")
    assert [(r.method, r.path, r.status, r.outcome) for r in records] == [
        ("POST", "/chat/completions", 200, model.OK)
    ] * 2
