"""Approve on deny, in a real session: pi (scripted provider) in a real writer fetches
a test host its allowlist does not list and is refused; the operator runs `egress allow`
and the agent's retry in the same session reaches it; once the entry's time has come
(the entry is given again with an injected clock that puts its end in the past) the
next retry is refused again. The test host listens on 127.0.0.1 only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.harness import connect
from tests.e2e.pool_support import make_pool, result_value
from tests.integration.writers_support import wp
from tests.support.registry import NAME, Registry, registry
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.config.paths import Paths
from writerpool.pool.modes import egress_allow

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

FETCH = """
python3 -c '
import urllib.request
try:
    urllib.request.urlopen("https://{name}:{port}/simple/wptiny/", timeout=20)
    print("fetch=reached")
except OSError as exc:
    print("fetch=" + str(exc))
'
"""


def script(port: int) -> Script:
    call = ToolCall(name="bash", arguments={"command": FETCH.format(name=NAME, port=port)})
    steps = [Step(tool_calls=[call]), Step(text="{tool_results}")]
    return Script(scripts=[ScriptEntry(match="fetch", steps=steps)], default=[Step(text="x")])


@pytest.fixture
def test_host(tmp_path: Path) -> Iterator[Registry]:
    with registry(tmp_path / "registry") as served:
        yield served


def test_a_denied_host_is_reached_after_egress_allow_and_refused_after_its_time(
    tmp_path: Path, test_host: Registry, image_pin: Path
) -> None:
    target = f"{NAME}:{test_host.port}"
    with ScriptedProvider(script(test_host.port)) as provider:
        pool = make_pool(tmp_path, provider, "grant", writers=1)
        config = Paths.from_env().config_file
        config.write_text(
            config.read_text() + f'\n[egress]\nca_bundle = "{test_host.ca}"\n\n'
            f'[egress.resolve]\n"{NAME}" = ["127.0.0.1"]\n'
        )
        wp("mode", "set", pool.alias, "container", "--profiles", "code", "--allow",
           "127.0.0.1/32,other.corp.test", "--apply", check=True)  # fmt: skip
        writer = pool.writer(1)

        async def scenario() -> list[dict[str, object]]:
            async with connect(pool.server) as client:
                started = await client.ok("pi_session_start", pool.start_args())
                sid = started["session"]["sessionId"]

                async def turn() -> dict[str, object]:
                    body = await client.ok(
                        "pi_session_prompt", {"sessionId": sid, "message": "fetch now"}
                    )
                    return dict(await client.wait_turn(sid, body["turnId"], limit=200))

                turns = [await turn()]
                code, added = wp("egress", "allow", writer, target, "--for", "30m")
                assert code == 0, added
                turns.append(await turn())
                # The same entry again, its end an hour past: its time has come.
                egress_allow.allow(Paths.from_env(), writer, target, "30m",
                                   now=lambda: time.time() - 3600)  # fmt: skip
                turns.append(await turn())
                await client.ok("pi_session_close", {"sessionId": sid})
                return turns

        first, second, third = anyio.run(scenario)
    said = [result_value(str(t["text"]), "fetch") for t in (first, second, third)]
    print(said)
    assert f"{target} is not allowed (not_listed)" in said[0]
    assert said[1] == "reached"
    assert f"{target} is not allowed (not_listed)" in said[2]
    denied = first["egressDenied"]
    assert {"destination": target, "reason": "not_listed"} in denied  # type: ignore[operator]
    _, log = wp("egress", "log", writer, check=True)
    print("\n".join(f["message"] for f in log["findings"]))
    decisions = log["data"]["decisions"]
    assert any(d.get("action") == "egress_allow" for d in decisions)
    allowed = [d for d in decisions if d.get("decision") == "allowed"]
    assert allowed and all(d["scope"] == "session" and d["entry"] == target for d in allowed)
    assert not Paths.from_env().writer_record(writer).egress_grants.exists()
