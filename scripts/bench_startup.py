"""serve_startup: seconds from exec to the answer to `initialize`, for `writerpool serve`
and for a minimal stdio server built on the same `mcp` SDK (one tool, nothing else).

A client such as Codex gives an optional server about a second to start; the SDK's own
import is most of either side's time, so the ratio shows what writerpool adds to it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from bench_env import BenchEnv
from bench_figures import Figure

MINIMAL_SERVER = """
import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

async def on_list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

async def main():
    server = Server("minimal", on_list_tools=on_list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "0"}},
}  # fmt: skip
DEADLINE = 30.0


def seconds_to_initialize(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Exec argv, send initialize at once, and time the arrival of its answer."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        buffer = b""
        while True:
            left = DEADLINE - (time.perf_counter() - started)
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                raise SystemExit(f"bench: {argv[-1]} did not answer initialize in time")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise SystemExit(f"bench: {argv[-1]} closed stdout before answering")
            buffer += chunk
            for line in buffer.split(b"\n")[:-1]:
                if json.loads(line).get("id") == 1:
                    return time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()


def startup_figure(env: BenchEnv, reps: int) -> Figure:
    figure = Figure("serve_startup", goal=1.2,
                    ours_label="writerpool serve: exec to the initialize answer",
                    baseline_label="a minimal stdio server on the same mcp SDK: exec to the initialize answer")  # fmt: skip
    minimal = env.root / "minimal_server.py"
    minimal.write_text(MINIMAL_SERVER)
    server_env = {**env.server_env(), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    ours = [sys.executable, "-m", "writerpool", "serve"]
    base = [sys.executable, str(minimal)]
    # One unmeasured run of each warms the page cache and the bytecode caches.
    seconds_to_initialize(ours, server_env, env.root)
    seconds_to_initialize(base, server_env, env.root)
    figure.load.append(list(os.getloadavg()))
    for rep in range(reps):
        pair = ((ours, figure.ours), (base, figure.baseline))
        for argv, samples in pair if rep % 2 == 0 else pair[::-1]:
            samples.append(seconds_to_initialize(argv, server_env, env.root))
    figure.load.append(list(os.getloadavg()))
    return figure
