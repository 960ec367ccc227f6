"""The forwarder hands the agent's own connection to the allowlist proxy (SCM_RIGHTS).

The real forwarder (images/egress-forwarder, run on the host) hands its connections
over and holds no socket of them afterwards; behind a relay that drops descriptors, as
an SSH forward does, the proxy declines and the forwarder relays; inside a writer's
container, across the bind-mounted socket, the proxy takes the agent's socket.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REQUIRE
from tests.support.connect import Records, host
from tests.support.egress import client_hello
from tests.support.handoff import NAME, Upstream, open_tunnel, proxy_for, short_dir, upstream
from writerpool.config.hosts import HostConfig
from writerpool.config.paths import Paths
from writerpool.egress.loop import InProcessLoop
from writerpool.proc import run
from writerpool.runtime.image import DEFAULT_IMAGES_DIR, load_pin
from writerpool.runtime.podman import podman_env
from writerpool.runtime.remote import connect

__all__ = ["host", "short_dir", "upstream"]  # fixtures
FORWARDER = DEFAULT_IMAGES_DIR / "egress-forwarder"


@contextlib.contextmanager
def forwarder(socket_path: Path, directory: Path) -> Iterator[tuple[int, int]]:
    """The forwarder serving the allowlist port for `socket_path` (started the launcher's
    way, --background): its port and the serving process's pid."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": "0",
           "WRITERPOOL_EGRESS_SOCKET": str(directory / "unused.sock"),
           "WRITERPOOL_CONNECT_PORT": str(port),
           "WRITERPOOL_CONNECT_SOCKET": str(socket_path)}  # fmt: skip
    parent = subprocess.Popen(
        ["/usr/bin/python3", str(FORWARDER), "--background"], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        assert parent.wait(timeout=20) == 0  # the port accepts now
        (serving,) = [int(e.name) for e in Path("/proc").iterdir()
                      if e.name.isdigit() and _group(int(e.name)) == parent.pid]  # fmt: skip
        yield port, serving
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGTERM)


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def sockets_of(pid: int) -> int:
    links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    return sum(link.startswith("socket:") for link in links)


def settled_sockets(pid: int, idle: int) -> int:
    """The forwarder's sockets once it is back to `idle`, or as many as it holds at a
    deadline: it closes its copy when the proxy's TAKEN is read, which its loop may get
    to after the tunnel has already carried bytes."""
    deadline = time.monotonic() + 10
    while (count := sockets_of(pid)) != idle and time.monotonic() < deadline:
        time.sleep(0.02)
    return count


def answered(sock: socket.socket, hello: bytes) -> bytes:
    """The upstream's answer to the tunnel's ClientHello."""
    sock.sendall(hello)
    return sock.recv(2)


def test_the_forwarder_hands_its_connections_over_and_keeps_none(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records, concurrent=1)
    try:
        with forwarder(proxy.listener.socket_path, short_dir) as (port, pid):
            idle = sockets_of(pid)
            sock, head = open_tunnel(port, upstream)
            with sock:
                assert head.startswith("HTTP/1.1 200 ")
                assert answered(sock, hello) == b"ok"
                assert proxy.listener.handoffs == 1
                assert settled_sockets(pid, idle) == idle  # the forwarder holds none of it
                over, refused = open_tunnel(port, upstream)  # past the cap: answered
                over.close()
            records.wait(2)
    finally:
        proxy.stop()
    assert refused.startswith("HTTP/1.1 429 ") and "(cap_concurrent)" in refused
    (allowed,) = [r for r in records.items if r.allowed]
    assert (allowed.bytes_up, allowed.bytes_down) == (len(hello), 2)


class DroppingRelay:
    """A Unix socket relayed byte for byte to another with read() and write(), as an SSH
    forward relays it: what is attached to the bytes (descriptors) is dropped."""

    def __init__(self, path: Path, target: Path) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen()
        self.target = target
        self.held: list[socket.socket] = []  # closed with the relay (none left to the gc)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.held += [conn, inner]
            inner.connect(str(self.target))
            for src, dst in ((conn, inner), (inner, conn)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
        for sock in self.held:  # the pipes' threads see an error and end
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def test_behind_a_relay_that_drops_descriptors_the_forwarder_relays(
    host: InProcessLoop, short_dir: Path, upstream: Upstream
) -> None:
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records)
    relay = DroppingRelay(short_dir / "relay.sock", proxy.listener.socket_path)
    try:
        with forwarder(short_dir / "relay.sock", short_dir) as (port, _):
            sock, head = open_tunnel(port, upstream)
            with sock:
                assert head.startswith("HTTP/1.1 200 ")
                assert answered(sock, hello) == b"ok"
                sock.shutdown(socket.SHUT_WR)  # the agent ends it: the tunnel ends
                assert sock.recv(1) == b""
            (record,) = records.wait(1)
    finally:
        relay.close()
        proxy.stop()
    assert proxy.listener.handoffs == 0
    assert (record.allowed, record.bytes_up, record.bytes_down) == (True, len(hello), 2)


PROBE = """
import socket, sys
port, target, hello = 18090, sys.argv[1], bytes.fromhex(sys.argv[2])
with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
    conn.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        head += conn.recv(4096)
    conn.sendall(hello)
    print(head.split(b" ")[1].decode(), conn.recv(2).decode(), flush=True)
"""


@pytest.mark.podman
@pytest.mark.image
def test_inside_a_writer_the_forwarder_hands_the_connection_over(
    host: InProcessLoop, short_dir: Path, upstream: Upstream, image_pin: Path
) -> None:
    """Across the bind-mounted socket, from the forwarder as pi's launcher runs it (PID 1,
    --network none) to a proxy on the host: the proxy takes the agent's socket."""
    if shutil.which("podman") is None:
        if REQUIRE:
            pytest.fail("podman is missing")
        pytest.skip("podman is missing")
    pin = load_pin(Paths.from_env())
    assert pin is not None
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records)
    name = f"writerpool-test-handoff-{uuid.uuid4().hex[:8]}"
    argv = ["podman", "run", "--rm", "--name", name, "--label", "io.writerpool.test=handoff",
            "--pull=never", "--network", "none", "--userns=keep-id", "--read-only",
            "--cap-drop=all", "--security-opt=no-new-privileges",
            "-v", f"{proxy.listener.socket_path.parent}:/egress",
            "-e", "WRITERPOOL_EGRESS_PORT=18089", "-e", "WRITERPOOL_EGRESS_SOCKET=/egress/none",
            "-e", "WRITERPOOL_CONNECT_PORT=18090",
            "-e", "WRITERPOOL_CONNECT_SOCKET=/egress/connect.sock", pin.image_id,
            "/usr/bin/python3", "/usr/local/lib/writerpool/egress-forwarder", "--supervise",
            "/usr/bin/python3", "-c", PROBE, f"{NAME}:{upstream.port}", hello.hex()]  # fmt: skip
    try:
        done = run(argv, env=podman_env(), timeout=180, check=False)
        records.wait(1)
    finally:
        run(["podman", "rm", "-f", "--", name], env=podman_env(), timeout=60, check=False)
        proxy.stop()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.out.split() == ["200", "ok"]
    assert proxy.listener.handoffs == 1
    (record,) = records.items
    assert (record.allowed, record.bytes_up, record.bytes_down) == (True, len(hello), 2)


REMOTE_PROBE = """
import os, signal, socket, subprocess, sys, tempfile
socket_path, target, hello = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
work = tempfile.mkdtemp()
script = os.path.join(work, "egress-forwarder")
with open(script, "w") as out:
    out.write(FORWARDER_SOURCE)
env = {"PATH": "/usr/bin:/bin", "WRITERPOOL_EGRESS_PORT": "0",
       "WRITERPOOL_EGRESS_SOCKET": os.path.join(work, "none"),
       "WRITERPOOL_CONNECT_PORT": str(port), "WRITERPOOL_CONNECT_SOCKET": socket_path}
parent = subprocess.Popen([sys.executable, script, "--background"], env=env,
                          stdout=subprocess.DEVNULL, start_new_session=True)
try:
    assert parent.wait(timeout=20) == 0
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        conn.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            head += conn.recv(4096)
        conn.sendall(hello)
        print(head.split(b" ")[1].decode(), conn.recv(2).decode(), flush=True)
finally:
    os.killpg(parent.pid, signal.SIGTERM)
    os.remove(script)
    os.rmdir(work)
"""


@pytest.mark.remote
def test_over_an_ssh_forward_the_offer_is_declined_and_the_forwarder_relays(
    host: InProcessLoop, short_dir: Path, upstream: Upstream, testhost: HostConfig
) -> None:
    """The proxy's socket forwarded to another host over SSH (as a remote writer's would
    be): the descriptor is dropped on the way, the proxy declines the bare offer, and the
    forwarder there relays the tunnel, audited as any other."""
    records, hello = Records(), client_hello(NAME)
    proxy = proxy_for(host, short_dir, upstream, records)
    source = REMOTE_PROBE.replace("FORWARDER_SOURCE", repr(FORWARDER.read_text()))
    try:
        with (
            connect("th", testhost) as remote,
            remote.forwarded_socket(proxy.listener.socket_path, "s-handoff") as there,
        ):
            done = remote.host.exec(["python3", "-", there, f"{NAME}:{upstream.port}",
                                     hello.hex()], input=source.encode(), timeout=120)  # fmt: skip
        (record,) = records.wait(1)
    finally:
        proxy.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.out.split() == ["200", "ok"]
    assert proxy.listener.handoffs == 0
    assert (record.allowed, record.bytes_up, record.bytes_down) == (True, len(hello), 2)
