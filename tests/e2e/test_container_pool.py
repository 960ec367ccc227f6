"""Container workspaces end to end: a real MCP client spawning `writerpool serve`, writers
on real rootless Podman, pi inside them on the scripted provider, and the operator's
commands (collect, reset) run between sessions while the server keeps running."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.harness import Client, RawServer, connect, files_holding
from tests.e2e.pool_support import (
    PLAIN_TEXT,
    POOL_SCRIPT,
    SLOW_TEXT,
    PoolEnv,
    containers_of,
    make_pool,
    result_value,
)
from tests.integration.test_collect_helpers import snapshot
from tests.integration.writers_support import codes, git, podman, wp
from writerpool.agent.scripted import ScriptedProvider
from writerpool.config.models import load_config
from writerpool.config.providers import PLACEHOLDER_KEY
from writerpool.pool.writer.container import writer_spec
from writerpool.pool.writer.lease import leased
from writerpool.pool.writer.verdicts import current
from writerpool.runtime.hosts import open_host
from writerpool.runtime.image import resolve_image
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

COMMIT_PROMPT = "commit-work: the feature is called heron-2718"
PLANT_PROMPT = "plant-settings: persistence plan marmot-1618"
DIRTY_PROMPT = "leave-dirty: draft for the lynx-1414 idea"
HELLO_PROMPT = "just chat about the weasel-5772 topic"
LONG_PROMPT = "take-long: think hard about the tapir-6931 design"
SWAP_PROMPT = "swap-git-dir: the quokka-3535 trick"
PROMPTS = [COMMIT_PROMPT, PLANT_PROMPT, DIRTY_PROMPT, HELLO_PROMPT, LONG_PROMPT, SWAP_PROMPT]
SECRET_WORDS = [
    "heron-2718", "marmot-1618", "lynx-1414", "weasel-5772", "tapir-6931", "quokka-3535",
]  # fmt: skip
SHA = re.compile(r"^[0-9a-f]{40}$")
TURN_LIMIT = 300


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(POOL_SCRIPT) as scripted:
        yield scripted


def forbidden(pool: PoolEnv) -> list[str]:
    """The key, the test's directory (every host path of the test lies under it), the
    account's real home (Podman's storage, pi's install) and every prompt."""
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    return [*pool.server.secrets, real_home, *PROMPTS, *SECRET_WORDS]


async def run_turn(client: Client, sid: str, message: str) -> dict[str, Any]:
    body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": message})
    return await client.wait_turn(sid, body["turnId"], limit=TURN_LIMIT)


async def start(client: Client, pool: PoolEnv) -> dict[str, Any]:
    return dict((await client.ok("pi_session_start", pool.start_args()))["session"])


def test_work_stays_in_the_writer_and_git_settings_cannot_be_planted(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "own", writers=1)
    name, clone = pool.writer(1), pool.clone(1)
    # Provisioning and acceptance left the checkout byte-identical (mtimes included).
    before = snapshot(pool.checkout)
    assert before == pool.pristine
    main_commit = git(pool.checkout, "rev-parse", "refs/heads/main")

    async def scenario() -> tuple[Client, dict[str, Any], dict[str, Any]]:
        async with connect(pool.server) as client:
            session = await start(client, pool)
            assert session["writer"] == name
            sid = session["sessionId"]
            committed = await run_turn(client, sid, COMMIT_PROMPT)
            planted = await run_turn(client, sid, PLANT_PROMPT)
            await client.ok("pi_session_close", {"sessionId": sid})
            return client, committed, planted

    client, committed, planted = anyio.run(scenario)
    client.assert_clean(forbidden(pool))
    assert committed["status"] == "completed"
    commit = result_value(committed["text"], "commit")
    assert SHA.match(commit)
    # Inside the writer, git could neither change its settings nor add a hook.
    assert planted["status"] == "completed"
    assert result_value(planted["text"], "config-exit") != "0"
    assert result_value(planted["text"], "hook-exit") != "0"
    assert result_value(planted["text"], "get-exit") == "1"  # no such key
    assert "fsmonitor" not in (clone / ".git" / "config").read_text()
    assert sorted(p.name for p in (clone / ".git" / "hooks").iterdir()) == []
    assert not (clone / "fsmonitor-ran").exists() and not (clone / "hook-ran").exists()
    # The commit exists in the writer's clone only: the checkout is byte-identical.
    assert (clone / "feature.txt").read_text() == "made by pi\n"
    assert snapshot(pool.checkout) == before
    assert containers_of(name) == []

    code, report = wp("writer", "collect", name, "--apply")
    assert code == 0, report
    assert "writer_collected" in codes(report)
    ref = f"refs/remotes/writer-{name}/pi-work"
    assert git(pool.checkout, "rev-parse", ref) == commit
    assert git(pool.checkout, "log", "-1", "--format=%s", ref) == "feature from pi"
    # Collection added refs and objects only: branches, HEAD and work tree are as before.
    assert git(pool.checkout, "rev-parse", "refs/heads/main") == main_commit
    assert git(pool.checkout, "symbolic-ref", "HEAD") == "refs/heads/main"
    after = snapshot(pool.checkout)
    assert {k: v for k, v in after.items() if not k.startswith(".git")} == {
        k: v for k, v in before.items() if not k.startswith(".git")
    }
    assert not (pool.checkout / "feature.txt").exists()
    assert containers_of(name) == []


def test_two_sessions_two_writers_and_a_dirty_writer_waits_for_the_operator(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "two", writers=2)
    w1, w2 = pool.writer(1), pool.writer(2)

    async def scenario() -> Client:
        async with connect(pool.server) as client:
            started: list[dict[str, Any]] = []

            async def one() -> None:
                started.append(await start(client, pool))

            async with anyio.create_task_group() as tg:
                tg.start_soon(one)
                tg.start_soon(one)
            assert sorted(s["writer"] for s in started) == [w1, w2]
            assert await client.code("pi_session_start", pool.start_args()) == "writer_unavailable"
            assert containers_of(w1, running_only=True) == [f"writerpool-{w1}"]
            assert containers_of(w2, running_only=True) == [f"writerpool-{w2}"]
            by_writer = {s["writer"]: s["sessionId"] for s in started}
            turns: dict[str, dict[str, Any]] = {}

            async def turn(writer: str, message: str) -> None:
                turns[writer] = await run_turn(client, by_writer[writer], message)

            # Both turns run at once, each in its own writer.
            async with anyio.create_task_group() as tg:
                tg.start_soon(turn, w1, DIRTY_PROMPT)
                tg.start_soon(turn, w2, HELLO_PROMPT)
            assert result_value(turns[w1]["text"], "dirty-exit") == "0"
            assert turns[w2]["text"] == PLAIN_TEXT
            for sid in by_writer.values():
                await client.ok("pi_session_close", {"sessionId": sid})
            assert (pool.clone(1) / "uncommitted.txt").exists()
            assert not (pool.clone(2) / "uncommitted.txt").exists()
            # Judged at close, pi and its container gone: the verdicts are current, so the
            # next start takes them instead of inspecting each clone again.
            judged = [current(pool.server.paths.writer_dir(w)) for w in (w1, w2)]
            assert [v.code if v else None for v in judged] == [
                "writer_holds_work",
                "writer_leasable",
            ]

            # w1 holds uncommitted work: the next session skips it ...
            held = await start(client, pool)
            assert held["writer"] == w2
            # ... and while w2 is busy, w1 is the only candidate and is refused; the
            # client learns why, per writer, in writer status's words (no paths).
            body = await client.call("pi_session_start", pool.start_args())
            assert body["error"]["code"] == "writer_unavailable"
            why = body["error"]["message"]
            assert f"{w1} " in why and "(writer_holds_work)" in why and "/" not in why, why
            assert f"{w2} writer_busy" in why, why

            # The operator collects, then resets; the running server re-admits w1.
            code, report = wp("writer", "reset", w1, "--apply")
            assert code != 0 and "writer_uncollected" in codes(report), report
            code, report = wp("writer", "collect", w1, "--apply")
            assert code == 0 and "writer_collected" in codes(report), report
            code, report = wp("writer", "reset", w1, "--apply")
            assert code == 0, report
            again = await start(client, pool)
            assert again["writer"] == w1
            for sid in (held["sessionId"], again["sessionId"]):
                await client.ok("pi_session_close", {"sessionId": sid})
            return client

    client = anyio.run(scenario)
    client.assert_clean(forbidden(pool))
    assert git(pool.checkout, "rev-parse", "--verify", f"refs/remotes/writer-{w1}/main-wip")
    assert not (pool.clone(1) / "uncommitted.txt").exists()
    assert containers_of(w1) == [] and containers_of(w2) == []
    starts = [a["outcome"] for a in pool.server.audit_lines() if a["action"] == "pi_session_start"]
    assert starts == ["ok", "ok", "writer_unavailable", "ok", "writer_unavailable", "ok"]


def test_abort_ends_a_long_turn_and_close_is_idempotent(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "abt", writers=1)
    name = pool.writer(1)

    async def scenario() -> Client:
        async with connect(pool.server) as client:
            sid = (await start(client, pool))["sessionId"]
            asked = provider.request_count
            body = await client.ok("pi_session_prompt", {"sessionId": sid, "message": LONG_PROMPT})
            # Abort only once pi is inside the slow answer.
            with anyio.fail_after(120):
                while provider.request_count == asked:
                    await anyio.sleep(0.2)
            running = await client.ok(
                "pi_turn_get", {"sessionId": sid, "turnId": body["turnId"], "waitSeconds": 1}
            )
            assert running["turn"]["status"] == "running"
            aborted = await client.ok("pi_session_abort", {"sessionId": sid})
            assert aborted == {"ok": True, "sessionId": sid, "turnId": body["turnId"],
                               "aborted": True}  # fmt: skip
            turn = await client.wait_turn(sid, body["turnId"], limit=60)
            assert (turn["status"], turn["stopReason"]) == ("aborted", "aborted")
            assert turn["text"] is None
            assert SLOW_TEXT not in str(turn)
            again = await client.ok("pi_session_abort", {"sessionId": sid})
            assert (again["aborted"], again["turnId"]) == (False, None)
            got = (await client.ok("pi_session_get", {"sessionId": sid}))["session"]
            assert got["state"] == "idle"
            closed = await client.ok("pi_session_close", {"sessionId": sid})
            assert closed["session"]["state"] == "closed"
            assert await client.ok("pi_session_close", {"sessionId": sid}) == closed
            kept = await client.ok("pi_turn_get", {"sessionId": sid, "turnId": body["turnId"]})
            assert kept["turn"] == turn
            assert await client.code("pi_session_abort", {"sessionId": sid}) == "session_closed"
            return client

    client = anyio.run(scenario)
    client.assert_clean(forbidden(pool))
    assert containers_of(name) == []


def _wait_gone(writer: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if containers_of(writer) == []:
            return True
        time.sleep(0.5)
    return containers_of(writer) == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat_line = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 (ppid) follows the command name, which is in parentheses.
        if entry.name.isdigit() and int(stat_line.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("victims", ["server", "server-and-podman"])
def test_a_killed_server_leaves_no_container_after_the_next_fenced_command(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, victims: str
) -> None:
    """SIGKILL mid-turn, of the server alone or with Podman's client (as an OOM kill of
    the whole tree would). pi's stdin closes either way and its container ends by
    itself; whatever is left, the next fenced command removes it."""
    pool = make_pool(tmp_path, provider, "kil", writers=1)
    name = pool.writer(1)
    agent_dir = pool.server.paths.writer_dir(name) / "agent"
    raw = RawServer(pool.server)
    try:
        raw.initialize()
        started = raw.call("pi_session_start", pool.start_args())
        assert started["ok"] and started["session"]["writer"] == name, started
        sid = started["session"]["sessionId"]
        asked = provider.request_count
        assert raw.call("pi_session_prompt", {"sessionId": sid, "message": LONG_PROMPT})["ok"]
        deadline = time.monotonic() + 120
        while provider.request_count == asked:
            assert time.monotonic() < deadline, "pi never asked the provider"
            time.sleep(0.2)
        assert containers_of(name, running_only=True) == [f"writerpool-{name}"]
        # Each agent runs in its own session (process group), led by `podman run`.
        agents = _children(raw.proc.pid) if victims == "server-and-podman" else []
        raw.proc.send_signal(signal.SIGKILL)
        for leader in agents:
            os.killpg(leader, signal.SIGKILL)
        raw.proc.wait(10)
        frames = [str(f) for f in raw.frames]
    finally:
        raw.close()
    for text in frames:
        for item in forbidden(pool):
            assert item not in text
    gone_alone = _wait_gone(name, 5)
    if victims == "server":
        assert gone_alone, "pi's container outlived its stdin"
    # The writer never held the key, only the session's token, which nobody could remove
    # (nor the proxy's socket); the next fenced command or server does.
    assert files_holding(agent_dir, pool.key) == []
    assert session_token(agent_dir) != PLACEHOLDER_KEY
    assert (agent_dir.parent / "egress" / "proxy.sock").exists()
    # `writer list` does not fence; a collect plan does.
    wp("writer", "list", check=True)
    code, report = wp("writer", "collect", name)
    assert code == 0, report
    assert containers_of(name) == []
    assert not (agent_dir.parent / "egress" / "proxy.sock").exists()

    # The next server removes the credential when it starts, then leases the writer.
    async def next_server() -> Client:
        async with connect(pool.server) as client:
            await client.ok("pi_capabilities_get")
            assert session_token(agent_dir) == PLACEHOLDER_KEY
            session = await start(client, pool)
            assert session["writer"] == name
            await client.ok("pi_session_close", {"sessionId": session["sessionId"]})
            return client

    anyio.run(next_server).assert_clean(forbidden(pool))
    assert files_holding(agent_dir, pool.key) == []
    assert containers_of(name) == []


def session_token(agent_dir: Path) -> str:
    """The key pi holds for the scripted provider: a session's token, or the placeholder."""
    document = json.loads((agent_dir / "models.json").read_text())
    return str(document["providers"]["scripted"]["apiKey"])


def _plant_leftover(pool: PoolEnv, name: str) -> None:
    """A running container with the writer's exact session spec and labels, standing
    in for a session container that outlived its server (a hung agent)."""
    paths = pool.server.paths
    state = load_state(paths.writer_dir(name))
    assert state is not None
    pool_settings = load_config(paths).config.pool
    image_id = resolve_image(paths, state.image)
    host = open_host()
    spec = writer_spec(paths, host, state, image_id, pool_settings, host.facts())
    argv = spec.run_argv(["sleep", "600"])
    podman(argv[0], "-d", *argv[1:])
    assert containers_of(name, running_only=True) == [f"writerpool-{name}"]


def test_a_leftover_session_container_is_removed_by_the_next_fenced_command(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "orf", writers=1)
    name = pool.writer(1)
    _plant_leftover(pool, name)
    # `writer list` reads only: it does not fence.
    wp("writer", "list", check=True)
    assert containers_of(name) == [f"writerpool-{name}"]
    # A collect plan (like every command that changes or reads a clone) fences.
    code, report = wp("writer", "collect", name)
    assert code == 0 and "nothing_to_collect" in codes(report), report
    assert containers_of(name) == []
    # So does a session's lease: the leftover goes and the session gets the writer.
    _plant_leftover(pool, name)

    async def scenario() -> Client:
        async with connect(pool.server) as client:
            session = await start(client, pool)
            assert session["writer"] == name
            turn = await run_turn(client, session["sessionId"], HELLO_PROMPT)
            assert turn["text"] == PLAIN_TEXT
            await client.ok("pi_session_close", {"sessionId": session["sessionId"]})
            return client

    anyio.run(scenario).assert_clean(forbidden(pool))
    assert containers_of(name) == []


def test_the_git_directory_cannot_be_rebuilt_with_a_hook(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    """The agent tries to rename `.git` (to leave its read-only config and hooks mounts
    behind) and rebuild it with its own hook. `.git` is a mount point of its own, so the
    rename fails; and a clone whose `.git` was tampered with is refused by the session
    guard anyway (shown by planting the same layout from the host, under the lease)."""
    pool = make_pool(tmp_path, provider, "swp", writers=1)
    name, clone = pool.writer(1), pool.clone(1)

    async def scenario() -> tuple[Client, dict[str, Any], str]:
        async with connect(pool.server) as client:
            session = await start(client, pool)
            swapped = await run_turn(client, session["sessionId"], SWAP_PROMPT)
            await client.ok("pi_session_close", {"sessionId": session["sessionId"]})
            return client, swapped, "closed"

    client, swapped, _ = anyio.run(scenario)
    client.assert_clean(forbidden(pool))
    assert result_value(swapped["text"], "swap-exit") != "0"
    assert not (clone / ".git-kept").exists() and not (clone / ".git" / "kept").exists()
    assert sorted(p.name for p in (clone / ".git" / "hooks").iterdir()) == []

    # The same rebuilt layout planted from the host, under the writer's lease as any
    # change to a clone is (a session's verdict from its close stops being current):
    # the guard must refuse the writer.
    with leased(pool.server.paths.writer_dir(name), 10.0):
        git_dir = clone / ".git"
        kept = clone / ".git-kept"
        git_dir.rename(kept)
        git_dir.mkdir()
        kept.rename(git_dir / "kept")
        for part in ("HEAD", "objects", "refs", "index"):
            source = git_dir / "kept" / part
            if source.is_dir():
                shutil.copytree(source, git_dir / part, symlinks=True)
            elif source.exists():
                shutil.copy2(source, git_dir / part)
        (git_dir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
        (git_dir / "hooks").mkdir()
        hook = git_dir / "hooks" / "pre-commit"
        hook.write_text("#!/bin/sh\ntouch /work/.git/hook-ran\n")
        hook.chmod(0o755)

    async def refused() -> tuple[Client, str]:
        async with connect(pool.server) as client:
            body = await client.call("pi_session_start", pool.start_args())
            if body["ok"]:  # the defect: the planted hook would run in this session
                await run_turn(client, body["session"]["sessionId"], COMMIT_PROMPT)
                await client.ok("pi_session_close", {"sessionId": body["session"]["sessionId"]})
                return client, "leased"
            return client, body["error"]["code"]

    client, outcome = anyio.run(refused)
    client.assert_clean(forbidden(pool))
    assert not (clone / ".git" / "hook-ran").exists(), "the planted hook ran"
    assert outcome == "writer_unavailable"
    # The operator's way back: a reset refuses to trust the clone and rebuilds it.
    code, report = wp("writer", "reset", name, "--discard", "--apply")
    assert code == 0, report
    assert not (clone / ".git" / "kept").exists()
    assert sorted(p.name for p in (clone / ".git" / "hooks").iterdir()) == []

    async def again() -> Client:
        async with connect(pool.server) as client:
            session = await start(client, pool)
            assert session["writer"] == name
            await client.ok("pi_session_close", {"sessionId": session["sessionId"]})
            return client

    anyio.run(again).assert_clean(forbidden(pool))
