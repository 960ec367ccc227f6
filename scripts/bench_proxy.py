"""proxy_overhead: a streamed completion through the writer's egress path vs directly.

Ours: a client on loopback TCP -> the in-writer forwarder (images/egress-forwarder,
run on the host) -> the session's Unix socket -> the provider proxy (token check,
route check, credential swap, caps, audit) -> the scripted provider on loopback.
Baseline: the same request straight to the scripted provider. Both sides open a fresh
connection per request, as the forwarder relays one connection per pi connection.
The scripted provider runs in a process of its own, as a real provider is elsewhere:
in this process it would compete with the proxy's loop for the interpreter.
Time to first byte (the first event) and total time are measured in the same request.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_figures import Figure

from writerpool.config.models import Caps, Config, Provider
from writerpool.config.providers import resolve_provider
from writerpool.egress.model import EgressRecord
from writerpool.egress.supervisor import EgressSupervisor
from writerpool.runtime.image import DEFAULT_IMAGES_DIR

# About 60 events over half a second: a model streaming ~120 tokens a second.
STREAM = {"text": "w" * 1000, "delay_seconds": 0.5}
FIRST_BYTE_GOAL_MS = 2.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _request(token: str | None, path: str) -> bytes:
    body = json.dumps({"model": "m", "stream": True,
                       "messages": [{"role": "user", "content": "bench"}]}).encode()  # fmt: skip
    auth = b"Authorization: Bearer " + token.encode() + b"\r\n" if token else b""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n".encode() + auth + b"\r\n" + body)  # fmt: skip


def _timed(port: int, payload: bytes) -> tuple[float, float]:
    """(seconds to the first body byte, seconds to the end of the stream)."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(payload)
        seen = b""
        first = None
        while chunk := conn.recv(65536):
            seen += chunk
            if first is None and b"\r\n\r\n" in seen and b"data: " in seen:
                first = time.perf_counter() - start
        total = time.perf_counter() - start
    if first is None or b"data: [DONE]" not in seen or not seen.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"bench: proxy_overhead got an unexpected answer: {seen[:200]!r}")
    return first, total


def proxy_figure(reps: int) -> Figure:
    figure = Figure("proxy_overhead", goal=1.05, unit="ms",
                    ours_label="streamed completion via forwarder, proxy socket and provider proxy",
                    baseline_label="the same request straight to the scripted provider")  # fmt: skip
    first_ours: list[float] = []
    first_base: list[float] = []
    records: list[EgressRecord] = []
    directory = Path(tempfile.mkdtemp(prefix="wpbench-", dir="/tmp"))
    script = directory / "script.json"
    script.write_text(json.dumps({"default": [STREAM]}))
    server = subprocess.Popen(
        [sys.executable, "-m", "writerpool.agent.scripted", "--script", str(script),
         "--host", "127.0.0.1"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        provider_port = int(server.stdout.readline())
        base_url = f"http://127.0.0.1:{provider_port}/v1"
        config = Config(providers={"bench": Provider(base_url=base_url, api_key_env="K")})
        upstream = resolve_provider(config, "bench")
        assert upstream is not None
        host = EgressSupervisor(audit=records.append)
        proxy = host.open(session="bench", writer=None, socket_path=directory / "egress.sock",
                          upstream=upstream, credential="sk-bench",
                          caps=Caps(requests=10**6, bytes_up=10**10, bytes_down=10**10,
                                    concurrent=8))  # fmt: skip
        port = _free_port()
        env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": str(port),
               "WRITERPOOL_EGRESS_SOCKET": str(proxy.socket_path)}  # fmt: skip
        forwarder = subprocess.Popen(
            ["/usr/bin/python3", str(DEFAULT_IMAGES_DIR / "egress-forwarder"), "--background"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            if forwarder.wait(timeout=10) != 0:
                raise SystemExit("bench: the egress forwarder did not start")
            ours = _request(proxy.token, "/p/chat/completions")
            direct = _request(None, "/v1/chat/completions")
            _timed(port, ours)  # warm both paths once
            _timed(provider_port, direct)
            figure.load.append(list(os.getloadavg()))
            for rep in range(reps):
                sides = [(port, ours, figure.ours, first_ours),
                         (provider_port, direct, figure.baseline, first_base)]  # fmt: skip
                for target, payload, totals, firsts in sides if rep % 2 == 0 else sides[::-1]:
                    first, total = _timed(target, payload)
                    firsts.append(first)
                    totals.append(total)
            figure.load.append(list(os.getloadavg()))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(forwarder.pid, 15)
            host.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        if server.stdout is not None:
            server.stdout.close()
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()
    added = statistics.median(o - b for o, b in zip(first_ours, first_base, strict=True)) * 1000
    figure.extra.update({
        "firstByteOurs": first_ours,
        "firstByteBaseline": first_base,
        "firstByteRatio": statistics.median(first_ours) / statistics.median(first_base),
        "firstByteAddedMsPairedMedian": added,
        "firstByteGoalMs": FIRST_BYTE_GOAL_MS,
        "auditRecords": len(records),
    })  # fmt: skip
    return figure


def first_byte_line(figure: Figure) -> str:
    extra = figure.extra
    ours = statistics.median(extra["firstByteOurs"]) * 1000
    base = statistics.median(extra["firstByteBaseline"]) * 1000
    added = extra["firstByteAddedMsPairedMedian"]
    met = "met" if added <= FIRST_BYTE_GOAL_MS else "MISSED"
    return (f"  first byte: {extra['firstByteRatio']:.2f} (ours {ours:.3f} ms / baseline "
            f"{base:.3f} ms), +{added:.3f} ms paired median  [goal <= +{FIRST_BYTE_GOAL_MS} ms: "
            f"{met}]; audit records: {extra['auditRecords']}")  # fmt: skip
