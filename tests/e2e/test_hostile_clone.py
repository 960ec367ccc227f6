"""A hostile agent against the host through its own clone: what it plants there neither
sizes the server's answers nor reaches the next session.

Real sessions: a real MCP client, `writerpool serve`, a writer on rootless Podman and pi
inside it, scripted to do the attack with its bash tool.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.harness import Client, connect
from tests.e2e.pool_support import make_pool, result_value
from tests.integration.writers_support import codes, wp
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.gitops.limits import ANSWER_MAX_BYTES, LIMITS

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

FLOOD = 1_500_000
FLOOD_REFS = (
    # 1.5 M branches in packed-refs, as the agent's own shell can write them.
    'c=$(git rev-parse HEAD) && python3 -c "import sys; '
    "open('.git/packed-refs', 'a').writelines("
    f'f\'{{sys.argv[1]}} refs/heads/flood/{{i:07d}}\\n\' for i in range({FLOOD}))" "$c"; '
    'echo "flood-exit=$?"; echo "flood-bytes=$(wc -c < .git/packed-refs)"'
)
PLANT = (
    "mkdir .git/objects/zz-channel && echo otter-4242 > .git/objects/zz-channel/note; "
    'echo "objects-exit=$?"; echo otter-4242 > .git/description; echo "description-exit=$?"'
)
READ_PLANTED = (
    'echo "planted=$(cat .git/objects/zz-channel/note .git/description 2>/dev/null | tr "\\n" " ")"'
)


def _bash(command: str) -> Step:
    return Step(tool_calls=[ToolCall(name="bash", arguments={"command": command})])


SCRIPT = Script(
    scripts=[
        ScriptEntry(
            match="many-branches",
            steps=[
                _bash('for i in $(seq 80); do git branch "many-$i"; done; echo "many-exit=$?"'),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(match="flood-refs", steps=[_bash(FLOOD_REFS), Step(text="{tool_results}")]),
        ScriptEntry(match="plant-channel", steps=[_bash(PLANT), Step(text="{tool_results}")]),
        ScriptEntry(match="read-channel", steps=[_bash(READ_PLANTED), Step(text="{tool_results}")]),
    ],
    default=[Step(text="nothing")],
)


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT) as scripted:
        yield scripted


async def _timed(client: Client, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The answer, and a line with its size and time (printed for the record)."""
    began = time.monotonic()
    body = await client.ok(name, args)
    size = len(json.dumps(body, sort_keys=True))
    assert size <= ANSWER_MAX_BYTES, (name, size)
    return body, f"{name}: {size} bytes in {time.monotonic() - began:.2f} s"


async def _turn(client: Client, sid: str, message: str) -> dict[str, Any]:
    body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": message})
    return await client.wait_turn(sid, body["turnId"], limit=300)


def test_a_clone_with_1_5_million_branches_gets_bounded_answers(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "flood", writers=1)
    name = pool.writer(1)
    lines: list[str] = []

    async def scenario() -> None:
        async with connect(pool.server) as client:
            sid = (await client.ok("pi_session_start", pool.start_args()))["session"]["sessionId"]
            many = await _turn(client, sid, "many-branches")
            assert result_value(many["text"], "many-exit") == "0"
            work = (await client.ok("pi_session_get", {"sessionId": sid}))["session"]["work"]
            assert (work["branchesChangedCount"], work["truncated"]) == (80, True)
            assert len(work["branchesChanged"]) == LIMITS.listed
            listed = (await client.ok("pi_session_list"))["sessions"][0]["work"]
            assert len(listed["branchesChanged"]) == 5 and listed["branchesChangedCount"] == 80

            flood = await _turn(client, sid, "flood-refs")
            assert result_value(flood["text"], "flood-exit") == "0"
            assert int(result_value(flood["text"], "flood-bytes")) > LIMITS.packed_refs_bytes
            turn_args = {"sessionId": sid, "turnId": "t-2"}
            for tool, args in [("pi_turn_get", turn_args), ("pi_session_list", {}),
                               ("pi_session_close", {"sessionId": sid}),
                               ("pi_turn_get", turn_args), ("pi_session_list", {})]:  # fmt: skip
                body, line = await _timed(client, tool, args)
                lines.append(line)
                work = body["work"] if "work" in body else (
                    body.get("session") or body["sessions"][0]
                )["work"]  # fmt: skip
                assert (work["branchesChanged"], work["branchesChangedCount"]) == ([], None)
                assert work["truncated"] is True
            # The guard refuses the flooded writer; reset (the work discarded) brings it back.
            assert await client.code("pi_session_start", pool.start_args()) == "writer_unavailable"

    anyio.run(scenario)
    print("\n" + "\n".join(lines))
    # Status does not claim a baseline it could not see, and names the way out.
    _, status = wp("writer", "status", name)
    row = status["data"]["writers"][0]
    assert (row["state"], row["atBaseline"]) == ("writer_inspect_failed", None)
    assert "could not be inspected" in row["atBaselineUnknown"]
    assert f"writerpool writer reset {name} --discard" in row["next"]
    code, report = wp("writer", "reset", name, "--discard", "--apply")
    assert code == 0 and "writer_reset" in codes(report), report


def test_files_planted_under_git_objects_and_description_are_refused_and_removed(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    """The guard sees the planted entries (the writer is not at its baseline), reset
    removes them by name without --discard, and so does the lease before the next
    session: that session never reads them."""
    pool = make_pool(tmp_path, provider, "chan", writers=1)
    name, git_dir = pool.writer(1), pool.clone(1) / ".git"

    async def session(prompt: str) -> dict[str, Any]:
        async with connect(pool.server) as client:
            sid = (await client.ok("pi_session_start", pool.start_args()))["session"]["sessionId"]
            turn = await _turn(client, sid, prompt)
            await client.ok("pi_session_close", {"sessionId": sid})
            return turn

    planted = anyio.run(session, "plant-channel")
    assert result_value(planted["text"], "objects-exit") == "0"
    assert result_value(planted["text"], "description-exit") == "0"
    assert (git_dir / "objects" / "zz-channel" / "note").exists()
    _, status = wp("writer", "status", name)
    row = status["data"]["writers"][0]
    assert row["atBaseline"] is False
    assert any("objects/zz-channel" in p and "description" in p for p in row["notAtBaseline"])
    assert row["atLease"]["leftovers"], row  # not work: the lease would remove them
    # Not work: reset needs no --discard, and names what it removed.
    code, report = wp("writer", "reset", name, "--apply")
    assert code == 0, report
    done = next(f for f in report["findings"] if f["code"] == "writer_reset")
    assert "objects/zz-channel" in done["message"] and "description" in done["message"]
    assert not (git_dir / "objects" / "zz-channel").exists()
    assert not (git_dir / "description").exists()
    assert "otter-4242" not in anyio.run(session, "read-channel")["text"]

    # Planted again, then straight to the next session: the lease removes them first.
    assert result_value(anyio.run(session, "plant-channel")["text"], "objects-exit") == "0"
    assert "otter-4242" not in anyio.run(session, "read-channel")["text"]
    assert not (git_dir / "objects" / "zz-channel").exists()
