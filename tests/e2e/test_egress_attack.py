"""One hostile session cannot starve the server or another session: an agent holds 1,000
idle connections and 800 endless header blocks on its proxy socket (reconnecting as
they are cut) while a second session starts and completes a turn. Real rootless
Podman, real pi, real MCP client; the scripted provider plays the model and the
attack runs through pi's own bash tool."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.harness import connect, processes_in
from tests.e2e.pool_support import PoolEnv, make_pool
from tests.support import procs
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.egress.gate import GateLimits
from writerpool.egress.worker import NOFILE_BASE

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

IDLE, HEADS = 1000, 800
ATTACK = r"""
import errno, json, resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
PATH, IDLE, HEADS, LOG = "/pi/egress/proxy.sock", int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
LINE = b"X-Endless: " + b"a" * 1000 + b"\r\n"
stats = {"connects": 0, "refused": 0, "cut": 0, "header_bytes": 0, "rounds": 0}

def conn(first=b""):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(PATH)
        if first:
            s.send(first)
    except OSError:
        s.close()
        stats["refused"] += 1
        return None
    stats["connects"] += 1
    return s

def gone(s):
    try:
        return s.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

heads = [conn(b"POST /p/chat/completions HTTP/1.1\r\n") for _ in range(HEADS)]
idle = [conn() for _ in range(IDLE)]
end = time.time() + 600
while time.time() < end:
    for group, first in ((heads, b"POST /p/chat/completions HTTP/1.1\r\n"), (idle, b"")):
        for i, s in enumerate(group):
            if s is not None and group is heads:
                try:
                    stats["header_bytes"] += s.send(LINE)
                except BlockingIOError:
                    pass
                except OSError:
                    s.close(); s = None
            if s is not None and gone(s):
                s.close(); s = None
            if s is None:
                stats["cut"] += group[i] is not None
                group[i] = conn(first)
    stats["rounds"] += 1
    with open(LOG, "w") as out:
        json.dump(stats, out)
    time.sleep(0.2)
"""
START = (
    "cat > /tmp/attack.py <<'EOF'\n" + ATTACK + "\nEOF\n"
    f"setsid nohup python3 /tmp/attack.py {IDLE} {HEADS} /work/attack.json "
    ">/dev/null 2>&1 < /dev/null &\necho started"
)


def attack_script() -> Script:
    return Script(
        scripts=[
            ScriptEntry(
                match="attack-the-proxy",
                steps=[
                    Step(tool_calls=[ToolCall(name="bash", arguments={"command": START})]),
                    Step(text="{tool_results}"),
                ],
            )
        ],
        default=[Step(text="the other session's answer")],
    )


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(attack_script()) as scripted:
        yield scripted


def _server_pid(pool: PoolEnv) -> int:
    for pid in processes_in(pool.server.root):
        if b"writerpool\x00serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    raise AssertionError("no server process")


def _egress_pids(server: int) -> list[int]:
    """The server's sessions' egress processes, the children of its fork server (tests
    beside this one run their own)."""
    mine = procs.mine()
    forks = {p.pid for p in mine
             if p.parent == server and b"writerpool.egress.worker" in p.argv}  # fmt: skip
    return [p.pid for p in mine if p.parent in forks]


def _usage(pid: int) -> tuple[int, int]:
    """(resident KiB, open descriptors) of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def _wait_for_attack(log: Path, rounds: int) -> dict[str, int]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            stats: dict[str, int] = json.loads(log.read_text())
        except (OSError, ValueError):
            stats = {}
        if stats.get("rounds", 0) >= rounds:
            return stats
        time.sleep(0.5)
    raise AssertionError(f"the attack did not run: {log}")


def test_another_session_completes_while_one_agent_floods_its_proxy(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "flood", writers=2)
    log = pool.clone(1) / "attack.json"
    samples: list[tuple[int, int]] = []
    egress: list[tuple[int, int]] = []

    async def scenario() -> dict[str, object]:
        async with connect(pool.server) as client:
            server = _server_pid(pool)
            first = (await client.ok("pi_session_start", pool.start_args()))["session"]
            attacker = first["sessionId"]
            assert first["writer"] == pool.writer(1)
            before = _usage(server)
            body = await client.ok(
                "pi_session_prompt", {"sessionId": attacker, "message": "attack-the-proxy"}
            )
            # The attack starts in the background of this turn's bash call, and pi's next
            # request goes through the same proxy: on a busy host it meets the flood and
            # the attacker starves itself (failed). Only the other session must not starve.
            first_turn = await client.wait_turn(attacker, body["turnId"], limit=300)
            assert first_turn["status"] in ("completed", "failed"), first_turn
            assert first_turn["status"] == "failed" or first_turn["text"] == "started", first_turn
            started = await anyio.to_thread.run_sync(_wait_for_attack, log, 3)
            samples.append(_usage(server))
            second = (await client.ok("pi_session_start", pool.start_args()))["session"]
            samples.append(_usage(server))
            body = await client.ok(
                "pi_session_prompt", {"sessionId": second["sessionId"], "message": "hello"}
            )
            turn = await client.wait_turn(second["sessionId"], body["turnId"], limit=300)
            samples.append(_usage(server))
            egress.extend(_usage(pid) for pid in _egress_pids(server))
            during = await anyio.to_thread.run_sync(_wait_for_attack, log, started["rounds"] + 3)
            await client.ok("pi_session_close", {"sessionId": second["sessionId"]})
            await client.ok("pi_session_close", {"sessionId": attacker})
            after = _usage(server)
            return {"before": before, "after": after, "turn": turn, "attack": during,
                    "second_writer": second["writer"]}  # fmt: skip

    result = anyio.run(scenario)
    print(f"\nserver (RSS KiB, fds): before {result['before']}, during {samples}, "
          f"after {result['after']}")  # fmt: skip
    print(f"egress processes (RSS KiB, fds): {egress}; attack {result['attack']}")
    turn = result["turn"]
    assert isinstance(turn, dict) and turn["status"] == "completed"
    assert turn["text"] == "the other session's answer"
    assert result["second_writer"] == pool.writer(2)
    attack = result["attack"]
    assert isinstance(attack, dict)
    # It really attacked: every connection made (again and again) and header bytes sent.
    assert attack["connects"] >= IDLE + HEADS and attack["cut"] > 0
    assert attack["header_bytes"] > 0
    before = result["before"]
    assert isinstance(before, tuple)
    for rss, fds in samples:
        assert fds <= before[1] + 32  # a second session's pipes, not the attacker's sockets
        assert rss <= before[0] + 64 * 1024
    limit = NOFILE_BASE + 2 * GateLimits().connections
    assert len(egress) == 2 and all(fds <= limit for _, fds in egress)
    warnings = (pool.server.root / "serve.log").read_text().count("connections at once")
    assert warnings <= 1  # once per session, never per connection
