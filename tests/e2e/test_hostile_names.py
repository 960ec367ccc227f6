"""Names and text that are not UTF-8 kill no server: a hostile agent names a branch and
a tag with the bytes ff fe in its clone and answers with a lone surrogate; every answer
still arrives, shows them escaped, and the server answers the next call.

Real sessions on a writer (rootless Podman, pi inside, scripted to plant the names with
its bash tool), through both transports: `writerpool serve` over stdio and the pool
service over HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.harness import Client, connect
from tests.e2e.pool_support import GIT_ID, PoolEnv, make_pool, result_value
from tests.e2e.service_support import http_client, running_service
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.state import tokens

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

# The bytes ff fe, made by printf (any shell), as a branch's and a tag's name.
NAME = "b=$(printf '\\377\\376')"
PLANT_BRANCH = (
    f'{NAME} && git switch -q -c "$b" && echo hostile > hostile.txt && git add hostile.txt && '
    f'git {GIT_ID} commit -q -m hostile; echo "branch-exit=$?"'
)
# The tag names a commit no branch reaches, so the inspection lists it among the refs
# that hold new history (pool/writer/inspect.py ExtraRef), not only among the tags.
PLANT_TAG = (
    f'{NAME} && git {GIT_ID} commit -q --allow-empty -m tagged && git tag "$b-tag" && '
    'git reset -q --hard HEAD~1; echo "tag-exit=$?"'
)
LONE = "a lone \ud800 surrogate"
SHOWN = "\\xff\\xfe"  # how an answer shows the two bytes (utf8.py)


def _bash(command: str) -> Step:
    return Step(tool_calls=[ToolCall(name="bash", arguments={"command": command})])


SCRIPT = Script(
    scripts=[
        ScriptEntry(match="plant-branch", steps=[_bash(PLANT_BRANCH), Step(text="{tool_results}")]),
        ScriptEntry(match="plant-tag", steps=[_bash(PLANT_TAG), Step(text="{tool_results}")]),
        ScriptEntry(match="say-lone", steps=[Step(text=LONE)]),
    ],
    default=[Step(text="nothing")],
)
# Each call answers or the test fails: a server whose transport died answers nothing.
CALL_BOUND = 300.0


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT) as scripted:
        yield scripted


@asynccontextmanager
async def _client(pool: PoolEnv, transport: str) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with connect(pool.server) as client:
            yield client
        return
    token = tokens.create(pool.server.paths, "alpha")
    with running_service(pool.server) as service:
        async with http_client(service.url, token) as client:
            yield client


def _shown(work: dict[str, Any]) -> list[str]:
    return [branch["name"] for branch in work["branchesChanged"]]


async def _turn(client: Client, sid: str, message: str) -> dict[str, Any]:
    """The answer of the pi_turn_get that saw the turn end (its work included)."""
    turn = await client.ok("pi_session_prompt", {"sessionId": sid, "message": message})
    args = {"sessionId": sid, "turnId": turn["turnId"], "waitSeconds": 10}
    with anyio.fail_after(CALL_BOUND):
        while True:  # bounded by CALL_BOUND
            body = await client.ok("pi_turn_get", args)
            if body["turn"]["status"] != "running":
                return body


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_names_and_text_that_are_not_utf8_reach_the_client_escaped(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, transport: str
) -> None:
    pool = make_pool(tmp_path, provider, "names", writers=1)

    async def scenario() -> None:
        async with _client(pool, transport) as client:
            started = await client.ok("pi_session_start", pool.start_args())
            sid = started["session"]["sessionId"]

            branch = await _turn(client, sid, "plant-branch")
            assert branch["turn"]["status"] == "completed", branch
            assert result_value(branch["turn"]["text"], "branch-exit") == "0"
            assert branch["work"]["headBranch"] == SHOWN
            assert _shown(branch["work"]) == [SHOWN]

            tag = await _turn(client, sid, "plant-tag")
            assert result_value(tag["turn"]["text"], "tag-exit") == "0"
            assert _shown(tag["work"]) == [SHOWN]  # the inspection read the clone

            lone = await _turn(client, sid, "say-lone")
            assert lone["turn"]["text"] == "a lone \\ud800 surrogate"

            with anyio.fail_after(CALL_BOUND):
                got = await client.ok("pi_session_get", {"sessionId": sid})
                assert got["session"]["work"]["headBranch"] == SHOWN
                listed = await client.ok("pi_session_list")
                assert _shown(listed["sessions"][0]["work"]) == [SHOWN]
                closed = await client.ok("pi_session_close", {"sessionId": sid})
                assert _shown(closed["session"]["work"]) == [SHOWN]
                # The server goes on answering.
                assert (await client.ok("pi_capabilities_get"))["ok"]

    anyio.run(scenario)
