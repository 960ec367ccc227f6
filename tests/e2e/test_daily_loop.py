"""The daily loop on a small real Python project with a test suite, end to end: a real
MCP client, `writerpool serve`, writers on real rootless Podman and pi in them on the
scripted provider, with the operator's commands in between while the server runs.

A session that runs the tests and commits nothing leaves a writer the next session
takes; after the operator advances main the next session starts on the new commit;
two collections of different branches keep both review refs; an image change on idle
writers is one `mode set --apply` that leaves them leasable (the one with work named).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.harness import Client, connect
from tests.e2e.pool_support import PoolEnv, make_pool, result_value
from tests.integration.writers_support import codes, git, podman, wp
from tests.support.cli import run_cli
from tests.support.images import remove_images
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.config.paths import Paths
from writerpool.runtime.image import resolve_image

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

GIT_ID = "-c user.name=Pi -c user.email=pi@example.invalid"
TURN_LIMIT = 300
PROJECT = {
    ".gitignore": "__pycache__/\n*.pyc\n",
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": (
        "import unittest\n\nimport calc\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
    ),
}


def _bash(command: str) -> Step:
    return Step(tool_calls=[ToolCall(name="bash", arguments={"command": command})])


def _branch(name: str) -> list[Step]:
    return [
        _bash(
            f"git switch -q -c {name} && echo {name} > {name}.txt && git add {name}.txt && "
            f"git {GIT_ID} commit -q -m '{name} from pi' && echo \"commit=$(git rev-parse HEAD)\""
        ),
        Step(text="{tool_results}"),
    ]


SCRIPT = Script(
    scripts=[
        # The project's own suite, as an agent investigating a bug would run it.
        ScriptEntry(
            match="run-tests",
            steps=[
                _bash(
                    'python3 -m unittest -v 2>&1; echo "tests-exit=$?"; '
                    'ls -d __pycache__ && echo "cache=yes"'
                ),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(
            match="show-head",
            steps=[_bash('echo "head=$(git rev-parse HEAD)"'), Step(text="{tool_results}")],
        ),
        ScriptEntry(
            match="edit-only",
            steps=[
                _bash('echo "# a note" >> calc.py; echo "edit-exit=$?"'),
                Step(text="{tool_results}"),
            ],
        ),
        ScriptEntry(match="branch-feat-a", steps=_branch("feat-a")),
        ScriptEntry(match="branch-feat-b", steps=_branch("feat-b")),
    ],
    default=[Step(text="nothing to do")],
)


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT) as scripted:
        yield scripted


def _project(checkout: Path) -> None:
    for name, text in PROJECT.items():
        (checkout / name).write_text(text)
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "a small project with its tests")


def _shown(*args: str) -> str:
    """A command's text output, as the operator sees it (printed for the transcript)."""
    done = run_cli(*args)
    print(f"$ writerpool {' '.join(args)}\n{done.out}{done.err}", flush=True)
    return done.out


async def _turn(client: Client, sid: str, message: str) -> dict[str, Any]:
    body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": message})
    return await client.wait_turn(sid, body["turnId"], limit=TURN_LIMIT)


async def _session(client: Client, pool: PoolEnv, message: str) -> tuple[dict[str, Any], str]:
    """Start a coding session, run one turn, close it: (the session as closed, the turn's
    text). Its work says whether the clone holds uncommitted changes: none at start,
    then as judged between turns, the same as at close."""
    session = (await client.ok("pi_session_start", pool.start_args()))["session"]
    sid = session["sessionId"]
    assert session["work"]["uncommittedChanges"] is False, session
    turn = await _turn(client, sid, message)
    assert turn["status"] == "completed", turn
    got = (await client.ok("pi_session_get", {"sessionId": sid}))["session"]
    closed = (await client.ok("pi_session_close", {"sessionId": sid}))["session"]
    assert got["work"]["uncommittedChanges"] == closed["work"]["uncommittedChanges"], got
    return dict(closed), str(turn["text"])


def _another_image() -> str:
    """A new local image ID with the pinned image's contents (one empty layer on top)."""
    pinned = resolve_image(Paths.from_env(), "default")
    podman("run", "--name", "wp-loop-img", "--pull=never", pinned, "true")
    try:
        return podman("commit", "-q", "wp-loop-img").strip().removeprefix("sha256:")
    finally:
        podman("rm", "-f", "wp-loop-img")


def test_the_daily_loop_on_a_project_with_tests(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    # One writer first, so each next session has only the writer the last one left.
    pool = make_pool(tmp_path, provider, "loop", writers=1, prepare=_project)
    w1, w2, w3 = pool.writer(1), pool.writer(2), pool.writer(3)
    first = git(pool.checkout, "rev-parse", "main")
    new_image = _another_image()

    async def scenario() -> None:
        async with connect(pool.server) as client:
            _shown("writer", "status", w1)
            # 1. A session runs the tests and commits nothing.
            session, text = await _session(client, pool, "run-tests: is add broken?")
            assert session["writer"] == w1
            assert result_value(text, "tests-exit") == "0" and "OK" in text, text
            assert result_value(text, "cache") == "yes", text
            assert (pool.clone(1) / "__pycache__").is_dir()
            after_tests = _shown("writer", "status", w1)
            assert "leasable" in after_tests and "removes leftovers" in after_tests

            # ... and the next session takes that writer, its leftovers removed.
            session, text = await _session(client, pool, "show-head")
            assert session["writer"] == w1 and result_value(text, "head") == first
            assert not (pool.clone(1) / "__pycache__").exists()
            assert session["work"]["uncommittedChanges"] is False, session

            # 2. The operator advances main: the next session starts on the new commit.
            (pool.checkout / "calc.py").write_text(PROJECT["calc.py"] + "\n\nZERO = 0\n")
            git(pool.checkout, "commit", "-q", "-am", "operator: a constant")
            second = git(pool.checkout, "rev-parse", "main")
            behind = _shown("writer", "status", w1)
            assert "behind main by 1" in behind and f"moves it to main at {second[:12]}" in behind
            session, text = await _session(client, pool, "show-head")
            assert session["writer"] == w1 and session["base"]["commit"] == second
            assert result_value(text, "head") == second

            # 3. Two collections of different branches: both review refs stay.
            session, text = await _session(client, pool, "branch-feat-a")
            feat_a = result_value(text, "commit")
            wp("writer", "finish", session["writer"], "--apply", check=True)
            session, text = await _session(client, pool, "branch-feat-b")
            feat_b = result_value(text, "commit")
            assert session["writer"] == w1
            code, report = wp("writer", "collect", w1, "--apply")
            assert code == 0 and "review_refs_kept" in codes(report), report
            assert git(pool.checkout, "rev-parse", f"refs/remotes/writer-{w1}/feat-a") == feat_a
            assert git(pool.checkout, "rev-parse", f"refs/remotes/writer-{w1}/feat-b") == feat_b

            # 4. Two more writers, then an image change: the idle writers are replaced in
            # one run, the one holding work (w1: collected, not finished) is named.
            wp("mode", "set", pool.alias, "container", "--profiles", "code", "--writers", "3",
               "--apply", check=True)  # fmt: skip
            change = ["mode", "set", pool.alias, "container", "--profiles", "code",
                      "--writers", "3", "--image", new_image]  # fmt: skip
            plan = _shown(*change)
            assert plan.count("writer_replace_planned") == 2 and w1 in plan
            done = _shown(*change, "--apply")
            assert done.count("(writer_replaced)") == 2, done
            assert f"writerpool writer finish {w1} --apply" in done
            code, status = wp("writer", "status")
            rows = {r["name"]: r for r in status["data"]["writers"]}
            assert rows[w2]["leasable"] and rows[w3]["leasable"], rows
            assert not rows[w1]["leasable"]
            session, text = await _session(client, pool, "edit-only")
            assert session["writer"] in (w2, w3) and result_value(text, "edit-exit") == "0"
            # An edit without a commit: the closed session's work says so.
            work = session["work"]
            assert work["branchesChanged"] == [] and work["uncommittedChanges"] is True, work
            assert "uncommitted" in work["note"], work

    try:
        anyio.run(scenario)
    finally:
        remove_images(new_image)
