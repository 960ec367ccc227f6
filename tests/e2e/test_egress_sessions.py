"""The `provider` network end to end: a coding session whose only way out is its
session's proxy on the host, on real rootless Podman with pi inside, driven by a real
MCP client. Every probe runs inside the writer through pi's own bash tool."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.harness import RawServer, connect, files_holding
from tests.e2e.pool_support import PoolEnv, make_pool, result_value
from tests.support import procs
from writerpool.agent.scripted import Script, ScriptedProvider, ScriptEntry, Step, ToolCall
from writerpool.crash import ENV
from writerpool.egress.sockets import socket_address
from writerpool.pool.writer.container import EGRESS_PORT

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

# The test key is "sk-scripted-<hex>"; `[d]` keeps the pattern from matching itself in
# the scanning command's own arguments.
KEY_PATTERN = "sk-scripte[d]-"
PROBE = """
scan=$(grep -rlasE '{pattern}' /pi /work /tmp "$HOME" /proc/[0-9]*/environ \
    /proc/[0-9]*/cmdline 2>/dev/null | wc -l)
echo "key-files=$scan"
echo "interfaces=$(ls /sys/class/net | tr '\\n' ' ')"
echo "routes=$(tail -n +2 /proc/net/route | wc -l)"
python3 - <<'EOF'
import json, socket, urllib.request, urllib.error
def attempt(address):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(address); return "connected"
    except OSError as exc:
        return type(exc).__name__
    finally:
        s.close()
print("direct=" + attempt(("192.0.2.1", 443)))
print("host-loopback=" + attempt(("127.0.0.1", {host_port})))
try:
    socket.getaddrinfo("example.com", 443); print("resolve=resolved")
except OSError as exc:
    print("resolve=" + type(exc).__name__)
token = json.load(open("/pi/agent/models.json"))["providers"]["scripted"]["apiKey"]
base = "http://127.0.0.1:{port}/p"
def status(path, key, method="GET", body=None):
    request = urllib.request.Request(base + path, data=body, method=method)
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
print("no-token=%s" % status("/models", None))
print("wrong-token=%s" % status("/models", "not-the-token"))
print("wrong-path=%s" % status("/files", token))
print("models=%s" % status("/models", token))
EOF
"""


def probe_script(host_port: int) -> Script:
    command = PROBE.format(pattern=KEY_PATTERN, host_port=host_port, port=EGRESS_PORT)
    return Script(
        scripts=[
            ScriptEntry(
                match="probe-egress",
                steps=[
                    Step(tool_calls=[ToolCall(name="bash", arguments={"command": command})]),
                    Step(text="{tool_results}"),
                ],
            ),
            ScriptEntry(
                match="write-file",
                steps=[
                    Step(
                        tool_calls=[
                            ToolCall(
                                name="write",
                                arguments={"path": "made.txt", "content": "through the proxy\n"},
                            )
                        ]
                    ),
                    Step(text="written"),
                ],
            ),
        ],
        default=[Step(text="plain")],
    )


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    # The scripted provider's own port doubles as "a port on the host's loopback".
    with ScriptedProvider(Script()) as scripted:
        scripted.script = probe_script(scripted.port)
        yield scripted


def egress_socket(pool: PoolEnv) -> Path:
    return pool.server.paths.writer_dir(pool.writer(1)) / "egress" / "proxy.sock"


def test_a_provider_session_holds_no_key_and_reaches_only_its_proxy(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "egress", writers=1)
    agent_dir = pool.server.paths.writer_dir(pool.writer(1)) / "agent"
    sock = egress_socket(pool)

    async def scenario() -> tuple[str, str]:
        async with connect(pool.server) as client:
            session = (await client.ok("pi_session_start", pool.start_args()))["session"]
            sid = session["sessionId"]
            assert stat.S_ISSOCK(os.lstat(sock).st_mode)
            assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
            # The writer's agent directory holds a token, never the key.
            assert files_holding(agent_dir, pool.key) == []
            document = json.loads((agent_dir / "models.json").read_text())
            entry = document["providers"]["scripted"]
            assert entry["baseUrl"] == f"http://127.0.0.1:{EGRESS_PORT}/p"
            assert entry["apiKey"] != pool.key and len(entry["apiKey"]) >= 32
            body = await client.ok(
                "pi_session_prompt", {"sessionId": sid, "message": "probe-egress now"}
            )
            probe = await client.wait_turn(sid, body["turnId"], limit=300)
            assert probe["status"] == "completed"
            body = await client.ok(
                "pi_session_prompt", {"sessionId": sid, "message": "write-file please"}
            )
            wrote = await client.wait_turn(sid, body["turnId"], limit=300)
            await client.ok("pi_session_close", {"sessionId": sid})
            return probe["text"], wrote["text"]

    probe, wrote = anyio.run(scenario)
    print(probe)  # the transcript of what the agent saw, for the record
    assert result_value(probe, "key-files") == "0"
    assert result_value(probe, "interfaces") == "lo"
    assert result_value(probe, "routes") == "0"
    assert result_value(probe, "direct") in ("OSError", "ConnectionRefusedError")
    assert result_value(probe, "host-loopback") == "ConnectionRefusedError"
    assert result_value(probe, "resolve") == "gaierror"
    assert result_value(probe, "no-token") == "401"
    assert result_value(probe, "wrong-token") == "403"
    assert result_value(probe, "wrong-path") == "403"
    assert result_value(probe, "models") == "200"
    # After the refusals the session still worked, through the proxy, with the real key.
    assert wrote == "written"
    assert (pool.clone(1) / "made.txt").read_text() == "through the proxy\n"
    assert provider.last_authorization == f"Bearer {pool.key}"
    # Closed: the proxy is gone with its socket, the token with the agent directory's entry.
    assert not sock.exists()
    after = json.loads((agent_dir / "models.json").read_text())
    assert after["providers"]["scripted"]["apiKey"] == "scripted"  # the placeholder
    egress = [line for line in pool.server.audit_lines() if line["action"] == "egress"]
    assert {line["status"] for line in egress} >= {401, 403, 200}
    assert all(line["writer"] == pool.writer(1) for line in egress)
    log = pool.server.paths.audit_log.read_text()
    assert pool.key not in log and "not-the-token" not in log


def _refused(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket_address(path) as address:  # the test's path is longer than sun_path
            probe.connect(address)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def _crash_at_start(pool: PoolEnv, points: str) -> None:
    """Start a session on a server that kills itself at `points` (see writerpool.crash)."""
    pool.server.env[ENV] = points
    raw = RawServer(pool.server)
    try:
        raw.initialize()
        with pytest.raises(AssertionError, match="closed stdout"):
            raw.call("pi_session_start", pool.start_args())
        assert raw.proc.wait(60) == -signal.SIGKILL
    finally:
        raw.close()
        del pool.server.env[ENV]


@pytest.mark.parametrize(
    "points",
    [
        "egress.proxy_started",  # the egress process outlives the server: it removes its socket
        "egress.proxy_started,egress.worker_stopping",  # both killed: the next server sweeps
    ],
)
def test_a_killed_servers_socket_and_token_are_gone_when_the_next_server_starts(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, points: str
) -> None:
    pool = make_pool(tmp_path, provider, "egkill", writers=1)
    sock = egress_socket(pool)
    models = pool.server.paths.writer_dir(pool.writer(1)) / "agent" / "models.json"
    _crash_at_start(pool, points)
    if "worker_stopping" in points:
        # Killed before removing its socket: the file stays, nobody listens on it.
        deadline = time.monotonic() + 60
        while not _refused(sock) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stat.S_ISSOCK(os.lstat(sock).st_mode) and _refused(sock)
    # The token was never written; the next server removes the socket, whatever is left.
    raw = RawServer(pool.server)
    try:
        raw.initialize()
        assert not sock.exists()
        entry = json.loads(models.read_text())["providers"]["scripted"]
        assert entry["apiKey"] == "scripted"  # the placeholder, never a token
        started = raw.call("pi_session_start", pool.start_args())
        assert started["ok"], started  # the same writer serves the next session
        assert stat.S_ISSOCK(os.lstat(sock).st_mode)
    finally:
        raw.close()


def _egress_process(egress_dir: Path) -> int:
    """The pid of the running egress process serving the socket in `egress_dir`."""
    found = []
    for process in procs.mine():
        if b"writerpool.egress.worker" not in process.argv:
            continue
        with contextlib.suppress(OSError):  # ended meanwhile
            if os.readlink(f"/proc/{process.pid}/cwd") == str(egress_dir):
                found.append(process.pid)
    assert len(found) == 1, found
    return found[0]


def _wait_dead(pid: int) -> None:
    """Until `pid` has exited (a zombie of the server counts: it runs no more)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    raise AssertionError(f"{pid} still runs")


def test_a_session_whose_proxy_is_gone_is_failed_at_the_next_call(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = make_pool(tmp_path, provider, "eglost", writers=1)
    sock = egress_socket(pool)

    async def scenario() -> tuple[str, str, str]:
        async with connect(pool.server) as client:
            sid = (await client.ok("pi_session_start", pool.start_args()))["session"]["sessionId"]
            proxy = _egress_process(sock.parent)
            os.kill(proxy, signal.SIGKILL)
            await anyio.to_thread.run_sync(_wait_dead, proxy)
            listed = await client.ok("pi_session_list")
            (row,) = [s for s in listed["sessions"] if s["sessionId"] == sid]
            code = await client.code("pi_session_prompt", {"sessionId": sid, "message": "hi"})
            await client.ok("pi_session_close", {"sessionId": sid})
            # A new session on the same writer gets a proxy of its own.
            again = (await client.ok("pi_session_start", pool.start_args()))["session"]
            body = await client.ok("pi_session_prompt", {"sessionId": again["sessionId"],
                                                         "message": "hello"})  # fmt: skip
            turn = await client.wait_turn(again["sessionId"], body["turnId"])
            return row["state"], code, turn["status"]

    state, code, status = anyio.run(scenario)
    assert (state, code, status) == ("failed", "session_egress_lost", "completed")
