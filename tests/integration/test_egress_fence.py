"""Each session's proxy runs in its own process with its own limits: what one session
does to its proxy socket (connections held open, endless header blocks, killing the
server) stays with that session. Real processes and sockets; the scripted provider
plays the provider."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_egress_proxy import REAL_KEY, ROOMY, Records, request, upstream_of
from writerpool.agent.scripted import Script, ScriptedProvider
from writerpool.egress.gate import GateLimits
from writerpool.egress.supervisor import EgressSession, EgressSupervisor
from writerpool.egress.worker import ADDRESS_SPACE

LIMITS = GateLimits()
SCRIPT = Script.model_validate({"default": [{"text": "an answer"}]})


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="egf", dir="/tmp"))
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", "--", str(path)], check=False)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT, host="127.0.0.1") as server:
        yield server


@pytest.fixture
def host() -> Iterator[EgressSupervisor]:
    egress = EgressSupervisor(audit=Records())
    try:
        yield egress
    finally:
        egress.close()


def open_session(
    host: EgressSupervisor, directory: Path, provider: ScriptedProvider, name: str
) -> EgressSession:
    upstream = upstream_of(provider.base_url())
    path = directory / name / "proxy.sock"
    return host.open(session=name, writer=None, socket_path=path, upstream=upstream,
                     credential=REAL_KEY, caps=ROOMY)  # fmt: skip


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    return sock


def closed_by_peer(socks: list[socket.socket], wait: float) -> set[socket.socket]:
    """The connections the proxy closed, waiting up to `wait` seconds for all of them."""
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN | select.POLLHUP)
    closed: set[socket.socket] = set()
    deadline = time.monotonic() + wait
    while len(closed) < len(socks) and (left := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(left * 1000):
            sock = by_fd[fd]
            try:
                gone = sock.recv(65536, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                gone = False
            except ConnectionError:
                gone = True
            if gone:
                closed.add(sock)
                poller.unregister(fd)
    return closed


def test_idle_connections_past_the_cap_are_closed_and_the_rest_cut_at_the_deadline(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider, "idle")
    other = open_session(host, short_dir, provider, "other")
    held = [connect(proxy.socket_path) for _ in range(3 * LIMITS.connections)]
    try:
        refused = closed_by_peer(held, 1.0)
        assert len(refused) == 2 * LIMITS.connections  # closed at the door
        assert descriptors(proxy.pid) <= LIMITS.connections + 32
        assert request(other)[0] == 200  # another session is served meanwhile
        rest = [s for s in held if s not in refused]
        assert closed_by_peer(rest, LIMITS.first_line_seconds + 10) == set(rest)
    finally:
        for sock in held:
            sock.close()
    assert request(proxy)[0] == 200  # the session recovers once its connections are gone


def test_endless_header_blocks_are_cut_and_the_proxy_stays_small(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider, "heads")
    line = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    held = [connect(proxy.socket_path) for _ in range(LIMITS.connections)]
    for sock in held:
        sock.setblocking(False)
        sock.send(b"POST /p/chat/completions HTTP/1.1\r\n")
    try:
        for _ in range(LIMITS.head_bytes // len(line) + 8):
            for sock in held:
                with contextlib.suppress(BlockingIOError, BrokenPipeError, ConnectionResetError):
                    sock.send(line)  # a full buffer or a cut connection is fine
        cut = len(closed_by_peer(held, LIMITS.head_seconds + 5))
        rss = status_kib(proxy.pid, "VmHWM")
    finally:
        for sock in held:
            sock.close()
    assert cut == len(held)
    assert rss < 200 * 1024  # peak resident size, KiB: the header bytes were never kept
    assert request(proxy)[0] == 200


def test_the_egress_process_runs_under_its_own_limits(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider, "limits")
    limits = Path(f"/proc/{proxy.pid}/limits").read_text()
    nofile = next(line for line in limits.splitlines() if line.startswith("Max open files"))
    soft, hard = nofile.split()[3:5]
    assert int(soft) == int(hard) <= 64 + 2 * LIMITS.connections
    space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert int(space.split()[3]) == ADDRESS_SPACE
    assert proxy.pid != os.getpid()


def test_no_host_path_is_bound_in_proc_net_unix(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider, "named")
    assert request(proxy)[0] == 200
    table = Path("/proc/net/unix").read_text()
    assert str(short_dir) not in table and "/tmp/" + short_dir.name not in table


def test_a_killed_egress_process_is_reported_gone(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider, "killed")
    assert proxy.alive
    os.kill(proxy.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30  # not this process's child: its fork server's
    while proxy.alive:
        assert time.monotonic() < deadline, "the killed egress process is still reported"
        time.sleep(0.01)
    proxy.stop()
    assert not proxy.socket_path.exists()


SERVER = """
import sys
from pathlib import Path
from tests.integration.test_egress_proxy import REAL_KEY, ROOMY, upstream_of
from writerpool.egress.supervisor import EgressSupervisor
host = EgressSupervisor()
proxy = host.open(session="s", writer=None, socket_path=Path(sys.argv[1]),
                  upstream=upstream_of(sys.argv[2]), credential=REAL_KEY, caps=ROOMY)
print(proxy.pid, flush=True)
sys.stdin.read()
"""


def test_a_killed_servers_egress_processes_remove_their_sockets_and_end(
    short_dir: Path, provider: ScriptedProvider
) -> None:
    path = short_dir / "s" / "proxy.sock"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(path), provider.base_url()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    try:
        assert server.stdout is not None
        worker = int(server.stdout.readline())
        assert path.exists()
        server.kill()
        server.wait(timeout=10)
        deadline = time.monotonic() + 30
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(worker)
        assert not path.exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for stream in (server.stdin, server.stdout):
            if stream is not None:
                stream.close()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_an_audit_line_per_request_reaches_the_server(
    short_dir: Path, provider: ScriptedProvider
) -> None:
    records = Records()
    egress = EgressSupervisor(audit=records)
    try:
        proxy = open_session(egress, short_dir, provider, "audited")
        assert request(proxy)[0] == 200
        (record,) = records.wait(1)
        assert json.dumps(record.__dict__).count(REAL_KEY) == 0
        assert record.session == "audited" and record.status == 200
    finally:
        egress.close()
