"""Each figure: writerpool's operation and the bare tool it is built on, measured in
alternating repetitions in one run (the order flips every repetition, so drift in the
shared machine's load falls on both sides)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import bench_node
from bench_env import PROFILE, BenchEnv, git, timed
from bench_mcp import Client, connect

from writerpool.agent import launch as agent_launch
from writerpool.agent.environment import HOST, pi_env
from writerpool.agent.install import NODE_VERSION
from writerpool.config.models import load_config
from writerpool.config.modes import ContainerSettings
from writerpool.gitops.base import resolve_base
from writerpool.pool.provision.make import provision
from writerpool.report import Report
from writerpool.runtime.image import resolve_image
from writerpool.runtime.podman import podman_env

POOL_SIZE = 8


@dataclass
class Figure:
    name: str
    ours: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    unit: str = "s"
    goal: float | None = None
    stretch: float | None = None  # a second, harder goal, shown beside the goal
    ours_label: str = ""
    baseline_label: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    load: list[list[float]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.ours) / statistics.median(self.baseline)

    def line(self) -> str:
        scale = 1000.0 if self.unit == "ms" else 1.0
        ours = statistics.median(self.ours) * scale
        base = statistics.median(self.baseline) * scale
        text = f"{self.name}: {self.ratio:.2f} (ours {ours:.3f} {self.unit} / baseline {base:.3f} {self.unit})"
        if self.goal is not None:
            text += f"  [goal <= {self.goal}: {'met' if self.ratio <= self.goal else 'MISSED'}"
            if self.stretch is not None:
                met = "met" if self.ratio <= self.stretch else "MISSED"
                text += f"; stretch <= {self.stretch}: {met}"
            text += "]"
        return text

    def paired_ratio(self) -> float | None:
        """The median of each repetition's own ratio: less moved by load drifting between
        repetitions (None where the two sides were not sampled in pairs)."""
        if len(self.ours) != len(self.baseline):
            return None
        return statistics.median(o / b for o, b in zip(self.ours, self.baseline, strict=True))

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": round(self.ratio, 4),
            "unit": "s",
            "oursMedian": statistics.median(self.ours),
            "baselineMedian": statistics.median(self.baseline),
            "ours": self.ours,
            "baseline": self.baseline,
            "ours_is": self.ours_label,
            "baseline_is": self.baseline_label,
            "goal": self.goal,
            "goalMet": None if self.goal is None else self.ratio <= self.goal,
            "stretch": self.stretch,
            "pairedRatioMedian": self.paired_ratio(),
            "loadavgBeforeAfter": self.load,
            **self.extra,
        }


def interleave(
    reps: int, ours: Callable[[int], float], baseline: Callable[[int], float], figure: Figure
) -> None:
    """Alternate the two sides, flipping which goes first on every repetition."""
    figure.load.append(list(os.getloadavg()))
    for rep in range(reps):
        pair = [(figure.ours, ours), (figure.baseline, baseline)]
        for samples, run in pair if rep % 2 == 0 else reversed(pair):
            samples.append(run(rep))
    figure.load.append(list(os.getloadavg()))


# -- bare tools -----------------------------------------------------------------------


def podman_true(image_id: str) -> float:
    seconds, _ = timed(subprocess.run, ["podman", "run", "--rm", image_id, "true"],
                       env=podman_env(), check=True, capture_output=True, timeout=300)  # fmt: skip
    return float(seconds)


def bare_pi_start(env: BenchEnv, cwd: Path) -> float:
    """Host pi in RPC mode, with writerpool's own flags: start to its first answer."""
    config = load_config(env.paths).config
    agent_dir = env.root / "bare-pi" / "agent"
    tmp = env.root / "bare-pi" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    agent_launch.render_for_profile(config, agent_dir, "scripted", False)
    args = agent_launch.pi_args(
        config.profiles[PROFILE], False, agent_dir, session_dir=tmp / "pi-sessions"
    )
    argv = [str(env.pi), *args]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=pi_env(agent_dir, HOST, tmpdir=tmp),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b'{"id":"1","type":"get_state"}\n')
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("bench: bare pi exited before answering")
            if json.loads(line).get("type") == "response":
                break
        return time.perf_counter() - start
    finally:
        proc.kill()
        proc.wait(10)


# -- session_start and mcp_overhead ---------------------------------------------------


async def session_figures(env: BenchEnv, reps: int, pings: int) -> list[Figure]:
    alias = "pool"
    image_id = resolve_image(env.paths, "default")
    workspace = env.workspaces[alias].repo
    start = Figure("session_start", goal=1.2,
                   ours_label="pi_session_start through MCP to a ready pi in a leased writer",
                   baseline_label="podman run --rm IMAGE true + host pi --mode rpc to first answer")  # fmt: skip
    readonly = Figure("readonly_session_start", goal=1.3,
                      ours_label="pi_session_start of a read-only profile: a throwaway "
                      "container with the checkout read-only and its provider proxy",
                      baseline_label="podman run --rm IMAGE true + host pi --mode rpc to first answer")  # fmt: skip
    overhead = Figure("mcp_overhead", unit="ms",
                      ours_label="pi_session_get round trip through MCP",
                      baseline_label="MCP ping round trip (the protocol's floor)")  # fmt: skip
    before: Figure | None = None
    if bench_node.ALIAS in env.workspaces:
        old_node = bench_node.wanted()
        before = Figure(f"session_start_node{old_node}", unit="s",
                        ours_label=f"session_start with pi on Node.js {old_node} (before)",
                        baseline_label=f"session_start with pi on Node.js {NODE_VERSION} (now)")  # fmt: skip
    async with connect(env.server_env(), env.root, env.root / "serve-bench.log") as client:
        start.load.append(list(os.getloadavg()))
        writers = []
        for rep in range(reps):
            if before is not None:
                seconds, old = await client.start_session(bench_node.ALIAS, PROFILE)
                before.ours.append(seconds)
                await client.close_session(old["sessionId"])

            async def ours() -> None:
                seconds, session = await client.start_session(alias, PROFILE)
                start.ours.append(seconds)
                writers.append(session.get("writer"))
                await client.close_session(session["sessionId"])

            def base() -> None:
                start.baseline.append(podman_true(image_id) + bare_pi_start(env, workspace))

            if rep % 2 == 0:
                await ours()
                await anyio.to_thread.run_sync(base)
            else:
                await anyio.to_thread.run_sync(base)
                await ours()
        start.load.append(list(os.getloadavg()))
        start.extra["writers"] = writers
        await readonly_samples(
            client, readonly, reps, lambda: podman_true(image_id) + bare_pi_start(env, workspace)
        )
        if before is not None:
            before.baseline = list(start.ours)  # the same run's "after" samples
        _, session = await client.start_session(alias, PROFILE)
        overhead.load.append(list(os.getloadavg()))
        for _ in range(pings):
            seconds, _ = await client.timed("pi_session_get", {"sessionId": session["sessionId"]})
            overhead.ours.append(seconds)
            overhead.baseline.append(await client.ping_seconds())
        overhead.load.append(list(os.getloadavg()))
        await client.close_session(session["sessionId"])
    return [start, readonly, overhead] if before is None else [start, before, readonly, overhead]


async def readonly_samples(
    client: Client, figure: Figure, reps: int, baseline: Callable[[], float]
) -> None:
    """readonly_session_start: a read-only session's start against the bare baseline."""
    figure.load.append(list(os.getloadavg()))
    for rep in range(reps):

        async def ours() -> None:
            seconds, session = await client.start_session("pool", "review")
            assert session["placement"] == "readonly_container", session
            figure.ours.append(seconds)
            await client.close_session(session["sessionId"])

        async def base() -> None:
            figure.baseline.append(await anyio.to_thread.run_sync(baseline))

        for step in (ours, base) if rep % 2 == 0 else (base, ours):
            await step()
    figure.load.append(list(os.getloadavg()))


# -- pool_contention --------------------------------------------------------------------


def leased_twice(audit: list[dict[str, Any]]) -> list[str]:
    """Writers that an audited start took while an earlier session still held them."""
    holder: dict[str, str] = {}
    problems = []
    for line in audit:
        writer, session = line.get("writer"), line.get("session")
        if line.get("action") == "pi_session_start" and line.get("outcome") == "ok" and writer:
            if writer in holder:
                problems.append(writer)
            holder[writer] = str(session)
        elif line.get("action") == "pi_session_close" and writer and holder.get(writer) == session:
            del holder[writer]
    return problems


async def _concurrent_starts(
    clients: list[Client],
) -> tuple[float, list[tuple[Client, dict[str, Any], float]]]:
    """Every client starts a session at once; wall time, and each session with its time."""
    sessions: list[tuple[Client, dict[str, Any], float]] = []

    async def one(client: Client) -> None:
        seconds, session = await client.start_session("pool", PROFILE)
        sessions.append((client, session, seconds))

    begin = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(one, client)
    return time.perf_counter() - begin, sessions


async def contention_figure(env: BenchEnv, rounds: int) -> Figure:
    figure = Figure("pool_contention",
                    ours_label=f"{POOL_SIZE} concurrent pi_session_start, one server each, {POOL_SIZE} writers",
                    baseline_label="one pi_session_start")  # fmt: skip
    by_round: list[list[str]] = []
    each: list[list[float]] = []
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                connect(env.server_env(), env.root, env.root / f"serve-pool-{n}.log")
            )
            for n in range(POOL_SIZE)
        ]
        figure.load.append(list(os.getloadavg()))
        for _ in range(rounds):
            seconds, session = await clients[0].start_session("pool", PROFILE)
            figure.baseline.append(seconds)
            await clients[0].close_session(session["sessionId"])
            seconds, sessions = await _concurrent_starts(clients)
            figure.ours.append(seconds)
            by_round.append(sorted(str(s.get("writer")) for _, s, _ in sessions))
            each.append(sorted(round(t, 3) for _, _, t in sessions))
            async with anyio.create_task_group() as tg:
                for client, session, _ in sessions:
                    tg.start_soon(client.close_session, session["sessionId"])
        figure.load.append(list(os.getloadavg()))
    audit = [json.loads(x) for x in env.paths.audit_log.read_text().splitlines()]
    twice = leased_twice(audit)
    distinct = all(len(set(r)) == len(r) == POOL_SIZE for r in by_round)
    figure.extra.update(writersByRound=by_round, startSecondsByRound=each, distinctWriters=distinct,
                        auditLeasedTwice=twice, auditLines=len(audit))  # fmt: skip
    return figure


# -- provision ----------------------------------------------------------------------------


def provision_figures(env: BenchEnv, reps: int) -> list[Figure]:
    """Provisioning alone (pool.provision.provision, in process) and `mode set --apply`
    (doctor gate + provisioning + acceptance), both over `git clone --no-local`."""
    ws = env.workspaces["big"]
    alone = Figure("provision", goal=1.5,
                   ours_label="pool.provision.provision of one writer (bundle, clone, verify, record)",
                   baseline_label="git clone --no-local")  # fmt: skip
    applied = Figure("provision_apply",
                     ours_label="writerpool mode set ALIAS container --apply (doctor, provision, acceptance)",
                     baseline_label="git clone --no-local")  # fmt: skip
    spare = "big-w2"  # outside the workspace's writer count; removed after each use
    settings = ContainerSettings(profiles=(PROFILE,), writers=1, base="main")
    base = resolve_base(ws.repo, "main")

    def ours_alone(_: int) -> float:
        seconds, _r = timed(provision, env.paths, "big", spare, ws.repo, settings, base,
                            Report("bench"))  # fmt: skip
        shutil.rmtree(env.paths.writer_dir(spare))
        return float(seconds)

    def ours_apply(_: int) -> float:
        shutil.rmtree(env.paths.writer_dir("big-w1"), ignore_errors=True)
        seconds, report = timed(env.set_container_mode, "big")
        codes = [f["code"] for f in report["findings"]]
        if "writer_accepted" not in codes:
            raise SystemExit(f"bench: big-w1 was not accepted: {codes}")
        return float(seconds)

    def bare_clone(rep: int) -> float:
        dest = env.root / f"bare-clone-{rep}"
        seconds, _r = timed(git, env.root, "clone", "-q", "--no-local", str(ws.repo), str(dest))
        shutil.rmtree(dest)
        return float(seconds)

    # Three sides, rotated each repetition; both figures share the clone's samples.
    for figure in (alone, applied):
        figure.load.append(list(os.getloadavg()))
    sides: list[tuple[list[float], Callable[[int], float]]] = [
        (alone.ours, ours_alone), (applied.ours, ours_apply), (alone.baseline, bare_clone),
    ]  # fmt: skip
    for rep in range(reps):
        for k in range(3):
            samples, run = sides[(rep + k) % 3]
            samples.append(run(rep))
    applied.baseline = alone.baseline
    for figure in (alone, applied):
        figure.load.append(list(os.getloadavg()))
    return [alone, applied]


# -- collect_scaling -------------------------------------------------------------------


def _one_commit(env: BenchEnv, writer: str, rep: int) -> None:
    """What an agent would leave: one commit on the base branch, on top of the base."""
    clone = env.clone_dir(writer)
    state = json.loads((env.paths.writer_dir(writer) / "state.json").read_text())
    git(clone, "reset", "-q", "--hard", state["base"]["commit"])
    (clone / "bench-change.txt").write_text(f"change number {rep}\n")
    git(clone, "add", "bench-change.txt")
    git(clone, "commit", "-q", "-m", f"bench change {rep}")


def collect_figure(env: BenchEnv, reps: int) -> Figure:
    figure = Figure("collect_scaling", goal=1.5,
                    ours_label="writer collect --apply, one new commit, 10,000-commit repository",
                    baseline_label="the same in a 10-commit repository")  # fmt: skip

    def collect(writer: str, rep: int) -> float:
        _one_commit(env, writer, rep)
        seconds, report = timed(env.wp_ok, "writer", "collect", writer, "--apply")
        codes = [f["code"] for f in report["findings"]]
        if "writer_collected" not in codes:
            raise SystemExit(f"bench: {writer} was not collected: {codes}")
        return float(seconds)

    interleave(reps, lambda rep: collect("big-w1", rep), lambda rep: collect("small-w1", rep),
               figure)  # fmt: skip
    return figure
