"""A coding session on a writer on the test host (a second Podman host over SSH): a real
MCP client, `writerpool serve`, the writer's container on that host with its storage
there, pi reaching the scripted provider through this machine's proxy, its socket
forwarded for the session only. Then the work is collected into the operator's checkout
and the writer finished. A connection lost mid-turn fails that session cleanly."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.conftest import CLIENT_BRANCH, MakeServer
from tests.e2e.harness import Client, RawServer, connect
from tests.integration.test_collect_helpers import collected
from tests.integration.writers_support import codes, git, make_checkout, wp
from tests.support import procs
from tests.support.testhost import add_host
from writerpool.config.hosts import HostConfig
from writerpool.config.paths import Paths
from writerpool.pool.writer.lease import Lease
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import RemotePodman
from writerpool.runtime.remote import connect as connect_host
from writerpool.runtime.spec import LABEL_WRITER

pytestmark = [
    pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi, pytest.mark.remote,
]  # fmt: skip

WRITER = "boxed-w1"
# The session's proxy socket on the host is named by its writer (the lease makes it one).
SOCKET_THERE = f"/writerpool/egress/{WRITER}/proxy.sock".encode()
CODE = {"workspace": "boxed", "executionProfile": "code"}


def _remote_writer() -> None:
    """boxed-w1 placed on th the way an operator does it: the image sent there, the
    isolation control run there, then mode set provisions the writer on th and accepts it
    with the harness in its container there."""
    wp("image", "transfer", "--host", "th", check=True)
    wp("control", "--host", "th", "--apply", check=True)
    options = ["--profiles", "code", "--network", "provider", "--writers", "1"]
    code, report = wp("mode", "set", "boxed", "container", *options, "--hosts", "th", "--apply")
    assert code == 0 and "writer_accepted" in codes(report), report
    [accepted] = [f for f in report["findings"] if f["code"] == "writer_accepted"]
    assert accepted["data"]["networkClass"] == "limited", accepted
    # Loopback only and the proxy answering: every probe the class rests on passed.
    probes = accepted["data"]["networkChecks"]
    assert {"net_interfaces", "net_routes", "net_proxy"} <= set(probes), probes
    assert set(probes.values()) == {"pass"}, probes


def _mounts_on(remote: RemotePodman) -> list[str]:
    """The source of every mount of every container on the host."""
    ids = remote.cli(["ps", "-a", "--format", "{{.ID}}"], timeout=60).out.split()
    sources: list[str] = []
    for cid in ids:  # bounded by the containers on the test host
        found = remote.cli(["inspect", "--format", "json", cid], timeout=60, check=False)
        for item in json.loads(found.out or "[]"):
            sources += [str(m.get("Source", "")) for m in item.get("Mounts") or []]
    return sources


def _api_forwarders(marker: bytes = b"writerpool-host-", flag: bytes = b"-L") -> list[int]:
    """This account's ssh processes forwarding a host's Podman API (serve's connections),
    or with `marker` and `flag` given, another kind of forward."""
    return [p.pid for p in procs.mine()
            if p.argv and p.argv[0].endswith(b"ssh") and flag in p.argv
            and any(marker in a for a in p.argv)]  # fmt: skip


@pytest.mark.every_testhost
def test_a_coding_session_on_a_remote_writer_is_collected_and_finished(
    tmp_path: Path, make_server: MakeServer, image_pin: Path, testhost: HostConfig
) -> None:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    server = make_server(boxed=checkout)
    paths = server.paths
    add_host(testhost, config=paths.config_file)
    wp("control", "--apply", check=True)
    _remote_writer()
    controller = (str(tmp_path), str(Path.home()), str(paths.state_dir),
                  pwd.getpwuid(os.getuid()).pw_dir)  # fmt: skip
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with connect(server) as client:
            # Lost mid-turn: the turn fails with the host's code, the writer is released.
            sid = (await client.ok("pi_session_start", CODE))["session"]["sessionId"]
            body = await client.ok("pi_session_prompt", {"sessionId": sid,
                                                          "message": "take-your-time"})  # fmt: skip
            with connect_host("th", testhost) as remote:
                seen["mounts"] = _mounts_on(remote)
            print("mounts of the containers on th:", *seen["mounts"], sep="\n  ")
            seen["killed"] = datetime.now(UTC).isoformat()  # beside the turn's own times
            for pid in _api_forwarders():
                os.kill(pid, signal.SIGKILL)
            turn = await client.wait_turn(sid, body["turnId"], limit=120)
            seen["lost"] = turn
            await _released(client, sid)
            await client.ok("pi_session_close", {"sessionId": sid})
            # A new session reaches the host again; its work is a commit in the writer.
            session = (await client.ok("pi_session_start", CODE))["session"]
            assert (session["writer"], session["placement"]) == (WRITER, "container")
            sid = session["sessionId"]
            body = await client.ok("pi_session_prompt", {"sessionId": sid,
                                                          "message": "client-commit"})  # fmt: skip
            seen["work"] = await client.wait_turn(sid, body["turnId"], limit=300)
            seen["closed"] = await client.ok("pi_session_close", {"sessionId": sid})
            # Closed: its forward and its container are gone, the server still running.
            assert not _api_forwarders(SOCKET_THERE, b"-R")
            with connect_host("th", testhost) as remote:
                assert remote.containers(LABEL_WRITER, WRITER) == []
                there = remote.host.exec(
                    ["sh", "-c", f"ls /run/user/*/writerpool/egress/{WRITER}/proxy.sock"]
                )
                assert there.returncode != 0, there.out

    async def _released(client: Client, sid: str) -> None:
        lease = Lease(paths.writer_dir(WRITER))
        lease.acquire(wait=30)  # free once the host was found gone, the session still open
        lease.release()
        seen["failed"] = await client.ok("pi_session_get", {"sessionId": sid})

    try:
        anyio.run(scenario)
        lost = seen["lost"]
        assert lost["status"] == "failed", lost
        # The server's log says why the agent ended, should it be for another reason.
        log_tail = (server.root / "serve.log").read_text(errors="replace")[-4000:]
        assert lost["error"].startswith("writer_host_unreachable"), (lost, seen["killed"], log_tail)
        # Nothing of this machine is mounted into a container on the test host.
        assert seen["mounts"], "no container ran on the test host"
        assert not [s for s in seen["mounts"] if s.startswith(controller)], seen["mounts"]
        assert seen["work"]["status"] == "completed", seen["work"]

        code, listed = wp("writer", "list")
        rows = {row["name"]: row for row in listed["data"]["writers"]}
        assert rows[WRITER]["host"] == "th", listed
        argv = [sys.executable, "-m", "writerpool", "writer", "list"]
        shown = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        print("writer list:", shown.stdout, sep="\n")
        assert testhost.target.address not in shown.stdout

        # The host unreachable (its port closed): writer status says so.
        target = testhost.target
        closed_url = f"ssh://{target.user}@{target.address}:2{target.socket}"
        config = paths.config_file
        config.write_text(config.read_text().replace(testhost.url, closed_url))
        code, status = wp("writer", "status", WRITER)
        assert "writer_host_unreachable" in json.dumps(status), status
        assert target.address not in json.dumps(status)
        config.write_text(config.read_text().replace(closed_url, testhost.url))

        code, report = wp("writer", "collect", WRITER, "--apply")
        assert code == 0 and "writer_collected" in codes(report), report
        branch = git(checkout, "rev-parse", f"refs/remotes/writer-{WRITER}/{CLIENT_BRANCH}")
        assert collected(checkout, WRITER)[CLIENT_BRANCH] == branch
        assert "change.txt" in git(checkout, "show", "--name-only", "--format=", branch)
        code, finished = wp("writer", "finish", WRITER, "--apply")
        assert code == 0, finished
    finally:
        with connect_host("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), WRITER, remote.name))


def _settled(check: Any) -> bool:
    for _ in range(150):  # bounded: 30 s for processes to see their pipes end
        if check():
            return True
        threading.Event().wait(0.2)
    return bool(check())


def test_a_killed_server_leaves_no_forward_and_the_next_session_takes_the_writer(
    tmp_path: Path, make_server: MakeServer, image_pin: Path, testhost: HostConfig
) -> None:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    server = make_server(boxed=checkout)
    add_host(testhost, config=server.paths.config_file)
    wp("control", "--apply", check=True)
    _remote_writer()
    raw = RawServer(server)
    try:
        raw.initialize()
        started = raw.call("pi_session_start", CODE)
        assert started["ok"] and started["session"]["writer"] == WRITER, started
        assert _api_forwarders() and _api_forwarders(SOCKET_THERE, b"-R")
        raw.proc.kill()
        raw.proc.wait(10)
    finally:
        raw.close()
    try:
        # Each forward ends with the server; pi ends with its stdin, its container with it.
        assert _settled(lambda: not _api_forwarders())
        assert _settled(lambda: not _api_forwarders(SOCKET_THERE, b"-R"))
        with connect_host("th", testhost) as remote:
            assert _settled(lambda: not remote.containers(LABEL_WRITER, WRITER))

        async def next_server() -> None:
            async with connect(server) as client:
                session = (await client.ok("pi_session_start", CODE))["session"]
                assert session["writer"] == WRITER
                await client.ok("pi_session_close", {"sessionId": session["sessionId"]})

        anyio.run(next_server)
    finally:
        with connect_host("th", testhost) as remote:
            remote.remove_storage(writer_at(Paths.from_env(), WRITER, remote.name))
