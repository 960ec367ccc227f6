"""connect_overhead: a 10 MB download through a workspace's allowlist path vs directly.

Ours: a client on loopback TCP -> the in-writer forwarder (images/egress-forwarder, run
on the host, its second port) -> the session's Unix socket -> the allowlist proxy
(CONNECT, allowlist decision, its own resolution, address judgement, audit) -> a file
server on loopback. Baseline: the same request straight to the file server. Each
request opens a fresh connection on both sides. Both sides first send a real TLS
ClientHello for the tunnel's name (the proxy reads it to check its server name, as for
any TLS client) and then plain HTTP: a tunnel relays TLS records unopened, so
encryption would cost both sides the same. The file server skips what comes before the
request line and runs in a process of its own, as a real registry is elsewhere. The
first byte is the time from opening the connection to the answer's first byte.

The direct side is a kernel-only loopback copy (about 1-2 GB/s here), so the figure is
the relays' whole cost. A third side, sampled with the other two, is the floor of any
relay on the host: one bare hop (a process of its own splicing each direction through a
pipe, as the proxy does, and checking nothing) in front of the file server. The
forwarder hands its connections to the proxy (`egress.handoff`), so ours is one such
hop plus the proxy's work per connection. A second set of samples paces the server at
50 MB/s, a fast registry mirror, and shows what that cost is next to a real transfer.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench_figures import Figure

from writerpool.egress.allowlist import Allowlist, expand
from writerpool.egress.connect import ConnectLimits, ConnectSession, LocalListener
from writerpool.egress.connect_model import ConnectRecord
from writerpool.egress.loop import InProcessLoop
from writerpool.runtime.image import DEFAULT_IMAGES_DIR

SIZE = 10 * 1024 * 1024
NAME = "files.bench.test"
PACED_MB_S = 50
FIRST_BYTE_GOAL_MS = 2.0
SERVER = """
import socket, sys, threading, time
body = b"x" * int(sys.argv[1])
rate = float(sys.argv[2])  # bytes a second for paced requests
listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(64)
print(listener.getsockname()[1], flush=True)
def serve(conn):
    with conn:
        seen = b""
        while b"\\r\\n\\r\\n" not in seen:
            chunk = conn.recv(4096)
            if not chunk:
                return
            seen += chunk
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body))
        if b"paced" not in seen:
            conn.sendall(body)
            return
        start, step = time.monotonic(), 1 << 20
        for offset in range(0, len(body), step):
            conn.sendall(body[offset:offset + step])
            time.sleep(max(0.0, start + (offset + step) / rate - time.monotonic()))
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
BARE_HOP = """
import fcntl, os, socket, sys, threading
target = int(sys.argv[1])
listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(64)
print(listener.getsockname()[1], flush=True)
def splice(source, sink):
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 256 * 1024)
    try:
        while size := os.splice(source.fileno(), write_end, 256 * 1024):
            while size:
                size -= os.splice(read_end, sink.fileno(), size)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        os.close(read_end); os.close(write_end)
def hop(conn):
    with conn, socket.create_connection(("127.0.0.1", target)) as upstream:
        back = threading.Thread(target=splice, args=(upstream, conn))
        back.start(); splice(conn, upstream); back.join()
while True:
    conn, _ = listener.accept()
    threading.Thread(target=hop, args=(conn,), daemon=True).start()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def client_hello(name: str) -> bytes:
    """The first flight of a real TLS client for `name` (no certificate is ever seen)."""
    while True:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=name)
        with contextlib.suppress(ssl.SSLWantReadError):
            tls.do_handshake()
        hello = outgoing.read()
        if b"\r\n\r\n" not in hello:  # the file server looks for the request's end
            return hello


def _download(
    port: int, tunnel: str | None, hello: bytes, paced: bool = False
) -> tuple[float, float]:
    """Seconds to the first byte and to the whole file (through a CONNECT tunnel when
    `tunnel` is set)."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        if tunnel is not None:
            conn.sendall(f"CONNECT {tunnel} HTTP/1.1\r\nHost: {tunnel}\r\n\r\n".encode())
            head = conn.recv(4096)
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"bench: connect_overhead tunnel refused: {head[:120]!r}")
        what = b"paced" if paced else b"file"
        conn.sendall(hello + b"GET /%s HTTP/1.1\r\nHost: bench\r\n\r\n" % what)
        got = len(conn.recv(262144))
        first = time.perf_counter() - start
        while chunk := conn.recv(262144):
            got += len(chunk)
    if got < SIZE:
        raise SystemExit(f"bench: connect_overhead got {got} of {SIZE} bytes")
    return first, time.perf_counter() - start


@contextlib.contextmanager
def _helper(script: str, *args: str) -> Iterator[int]:
    """A Python `script` in a process of its own for the block; the port it prints."""
    process = subprocess.Popen([sys.executable, "-c", script, *args],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


@contextlib.contextmanager
def _forwarder(directory: Path, socket_path: Path) -> Iterator[int]:
    """The in-writer forwarder (run here) for the allowlist socket; its port."""
    port, provider_port = _free_port(), _free_port()
    env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": str(provider_port),
           "WRITERPOOL_EGRESS_SOCKET": str(directory / "unused.sock"),
           "WRITERPOOL_CONNECT_PORT": str(port),
           "WRITERPOOL_CONNECT_SOCKET": str(socket_path)}  # fmt: skip
    forwarder = subprocess.Popen(
        ["/usr/bin/python3", str(DEFAULT_IMAGES_DIR / "egress-forwarder"), "--background"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        if forwarder.wait(timeout=10) != 0:
            raise SystemExit("bench: the egress forwarder did not start")
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(forwarder.pid, 15)


def connect_figure(reps: int) -> Figure:
    figure = Figure("connect_overhead", goal=1.5, stretch=1.1, unit="ms",
                    ours_label="10 MB via forwarder, allowlist socket and CONNECT proxy",
                    baseline_label="the same download straight from the file server")  # fmt: skip
    records: list[ConnectRecord] = []
    paced: dict[str, list[float]] = {"ours": [], "baseline": []}
    first: dict[str, list[float]] = {"ours": [], "baseline": []}
    bare: list[float] = []
    hello = client_hello(NAME)
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/tmp")))
        file_port = stack.enter_context(_helper(SERVER, str(SIZE), str(PACED_MB_S * 1e6)))
        bare_port = stack.enter_context(_helper(BARE_HOP, str(file_port)))
        host = InProcessLoop()  # the relay code a session's egress process runs
        stack.callback(host.close)
        words = (f"{NAME}:{file_port}", f"127.0.0.1/32:{file_port}")
        proxy = LocalListener(host, ConnectSession(
            session="bench", writer=None, socket_path=directory / "connect.sock",
            allowlist=Allowlist(expand(words, {})[0]), resolve={NAME: ("127.0.0.1",)},
            limits=ConnectLimits(concurrent=8, total=10**6, header_bytes=16384,
                                 header_seconds=10, idle_seconds=60),
            audit=records.append,
        ))  # fmt: skip
        proxy.start()
        stack.callback(proxy.stop)
        port = stack.enter_context(_forwarder(directory, proxy.listener.socket_path))
        tunnel = f"{NAME}:{file_port}"
        _download(port, tunnel, hello)  # warm every path once
        _download(file_port, None, hello)
        _download(bare_port, None, hello)
        figure.load.append(list(os.getloadavg()))
        for rep in range(reps):
            sides = [(port, tunnel, figure.ours, "ours"),
                     (file_port, None, figure.baseline, "baseline")]  # fmt: skip
            for target, via, samples, side in sides if rep % 2 == 0 else sides[::-1]:
                to_first, whole = _download(target, via, hello)
                first[side].append(to_first)
                samples.append(whole)
            bare.append(_download(bare_port, None, hello)[1])
        for rep in range(max(3, reps // 3)):
            pairs = [(port, tunnel, "ours"), (file_port, None, "baseline")]
            for target, via, side in pairs if rep % 2 == 0 else pairs[::-1]:
                paced[side].append(_download(target, via, hello, paced=True)[1])
        figure.load.append(list(os.getloadavg()))
        handoffs = proxy.listener.handoffs
    added = statistics.median(o - b for o, b in zip(first["ours"], first["baseline"], strict=True))
    figure.extra.update({"bytes": SIZE, "auditRecords": len(records), "handoffs": handoffs,
                         "pacedMBs": PACED_MB_S, "pacedOurs": paced["ours"],
                         "pacedBaseline": paced["baseline"], "firstByteOurs": first["ours"],
                         "firstByteBaseline": first["baseline"],
                         "firstByteAddedMsPairedMedian": added * 1000,
                         "firstByteGoalMs": FIRST_BYTE_GOAL_MS, "bareHop": bare})  # fmt: skip
    return figure


def paced_line(figure: Figure) -> str:
    extra = figure.extra
    ours = statistics.median(extra["pacedOurs"]) * 1000
    base = statistics.median(extra["pacedBaseline"]) * 1000
    first_ours = statistics.median(extra["firstByteOurs"]) * 1000
    first_base = statistics.median(extra["firstByteBaseline"]) * 1000
    added = extra["firstByteAddedMsPairedMedian"]
    met = "met" if added <= FIRST_BYTE_GOAL_MS else "MISSED"
    bare = statistics.median(extra["bareHop"]) * 1000
    unpaced = statistics.median(figure.baseline) * 1000
    return (
        f"  one bare relay hop (the floor): {bare / unpaced:.2f} "
        f"(bare hop {bare:.3f} ms / baseline {unpaced:.3f} ms)\n"
        f"  at {extra['pacedMBs']} MB/s from the server: {ours / base:.2f} "
        f"(ours {ours:.1f} ms / baseline {base:.1f} ms)\n"
        f"  first byte: ours {first_ours:.3f} ms / baseline {first_base:.3f} ms, "
        f"+{added:.3f} ms paired median  [goal <= +{FIRST_BYTE_GOAL_MS} ms: {met}]"
    )
