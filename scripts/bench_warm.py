"""warm_claim: a coding session's start that claims the writer the pool service keeps
warm, from the start call to the answer, through the service's HTTP transport.

Ours: `pi_session_start` sent by a real MCP client over streamable HTTP (a bearer token,
loopback) to a running `writerpool service` holding one warm writer (`mode set … --warm
1`: container running, pi started and idle, no provider access): the HTTP round trip,
the claim's checks, the session's egress grant (its proxy process forked from the
service's egress fork server, started ahead) and pi's switch_session, set_model and
set_thinking_level. Baseline: the bare tools
a cold start is built on (`podman run --rm IMAGE true` plus host pi to its first
answer), as for session_start. Goals: p50 <= 0.1 s, p95 <= 0.2 s. Between samples the
session is closed and the service warms the writer again (not timed); `scripts/bench
--only warm` also measures session_start in the same run (bench_main.py).

With the test host configured (WRITERPOOL_TESTHOST_*), a second workspace keeps its one
writer warm on that host (`--hosts th --warm th=1`, after `image transfer` and `control
--host th`), and each round claims it too: the claim there adds the session's egress
forward to that host. Both lines print from one run.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from bench_env import PROFILE, BenchEnv
from bench_figures import Figure, bare_pi_start, podman_true
from bench_mcp import Client
from bench_remote import configured
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from writerpool.runtime.image import resolve_image

ALIAS = "warm"
REMOTE_ALIAS = "warmrem"  # its writer on the test host
CLIENT = "bench"
P50_GOAL = 0.1
P95_GOAL = 0.2
# The service warms the writer again after each claim (guard, container, pi).
REWARM_SECONDS = 180.0


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def remote_host() -> object | None:
    """The test host's settings, when the environment names one."""
    return configured()


def warm_remote(env: BenchEnv) -> None:
    """REMOTE_ALIAS's writer placed on the test host as an operator does it, kept warm."""
    host = configured()
    assert host is not None
    with env.paths.config_file.open("a") as out:
        out.write(f'\n[hosts.th]\nurl = "{host.url}"\nidentity = "{host.identity}"\n'
                  f'known_hosts = "{host.known_hosts}"\n')  # fmt: skip
    env.wp_ok("image", "transfer", "--host", "th")
    env.wp_ok("control", "--host", "th", "--apply")
    env.set_container_mode(REMOTE_ALIAS, "--hosts", "th", "--warm", "th=1")


def _claim_line(samples: list[float], where: str) -> str:
    p50 = statistics.median(samples)
    p95 = _percentile(samples, 0.95)
    met = p50 <= P50_GOAL and p95 <= P95_GOAL
    return (f"  warm_claim ({where}) p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms over "
            f"{len(samples)} claims through HTTP  [goal p50 <= {P50_GOAL * 1000:.0f} ms, "
            f"p95 <= {P95_GOAL * 1000:.0f} ms: {'met' if met else 'MISSED'}]")  # fmt: skip


def warm_line(figure: Figure) -> str:
    rewarm = statistics.median(figure.extra["rewarmSeconds"])
    audit = figure.extra["audit"]
    lines = [_claim_line(figure.ours, "local writer")]
    if figure.extra["remoteClaims"]:
        lines.append(_claim_line(figure.extra["remoteClaims"], "writer on the test host"))
    lines.append(f"  warmed again after each session in {rewarm:.1f} s (median, untimed); the "
                 f"audit shows {audit['warm']} of {audit['starts']} starts as warm claims, "
                 f"{audit['claims']} warm_claim lines by host {audit['byHost']}")  # fmt: skip
    return "\n".join(lines)


@asynccontextmanager
async def _http_client(url: str, token: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Client(session)


async def _warm_ready(client: Client, alias: str = ALIAS) -> float:
    """Seconds until the service holds the workspace's writer warm; bounded."""
    began = time.perf_counter()
    while time.perf_counter() - began < REWARM_SECONDS:
        caps = await client.call("pi_capabilities_get")
        [ws] = [w for w in caps["workspaces"] if w["alias"] == alias]
        if ws.get("warmReady", 0) >= 1:
            return time.perf_counter() - began
        await anyio.sleep(0.05)
    raise SystemExit("bench: the service did not warm the writer again")


async def _claims(url: str, token: str, reps: int, figure: Figure, env: BenchEnv) -> None:
    image_id = resolve_image(env.paths, "default")
    workspace = env.workspaces[ALIAS].repo

    def base() -> float:
        return podman_true(image_id) + bare_pi_start(env, workspace)

    async with _http_client(url, token) as client:

        async def ours(alias: str = ALIAS) -> float:
            figure.extra["rewarmSeconds"].append(await _warm_ready(client, alias))
            seconds, session = await client.start_session(alias, PROFILE)
            if not session.get("writer"):
                raise SystemExit("bench: the claim gave no writer")
            await client.close_session(session["sessionId"])
            return seconds

        remote = REMOTE_ALIAS in env.workspaces
        await ours()  # the first of each side pays for imports and the page cache
        if remote:
            await ours(REMOTE_ALIAS)
        await anyio.to_thread.run_sync(base)
        figure.extra["rewarmSeconds"].clear()
        figure.load.append(list(os.getloadavg()))
        for rep in range(reps):
            if rep % 2 == 0:
                figure.ours.append(await ours())
                figure.baseline.append(await anyio.to_thread.run_sync(base))
            else:
                figure.baseline.append(await anyio.to_thread.run_sync(base))
                figure.ours.append(await ours())
            if remote:
                figure.extra["remoteClaims"].append(await ours(REMOTE_ALIAS))
        figure.load.append(list(os.getloadavg()))


def warm_figure(env: BenchEnv, reps: int) -> Figure:
    figure = Figure("warm_claim",
                    ours_label="pi_session_start over the service's HTTP transport, claiming "
                               "its warm writer (checks, egress grant, pi switch_session/"
                               "set_model/set_thinking_level)",
                    baseline_label="podman run --rm IMAGE true + host pi --mode rpc to "
                                   "first answer (the bare tools of a cold start)")  # fmt: skip
    figure.extra["rewarmSeconds"] = []
    figure.extra["remoteClaims"] = []
    token = env.wp_ok("service", "token", "create", CLIENT)["data"]["token"]
    url = env.wp_ok("service", "start")["data"]["url"]
    try:
        anyio.run(_claims, url, token, reps, figure, env)
    finally:
        env.wp_ok("service", "stop")
    figure.extra["audit"] = _audited_warm_starts(env)
    return figure


def _audited_warm_starts(env: BenchEnv) -> dict[str, Any]:
    """How many of the service's session starts the audit log shows as warm claims, and
    the warm_claim lines (with their proof) by host."""
    lines = [json.loads(line) for line in env.paths.audit_log.read_text().splitlines()]
    starts = [s for s in lines
              if s.get("action") == "pi_session_start" and s.get("client") == CLIENT]  # fmt: skip
    claims = [c for c in lines if c.get("action") == "warm_claim"]
    hosts = sorted({str(c.get("host")) for c in claims})
    return {"starts": len(starts), "warm": sum(1 for s in starts if s.get("warm")),
            "claims": len(claims),
            "byHost": {h: sum(1 for c in claims if c.get("host") == h) for h in hosts}}  # fmt: skip
