"""Profile, in process, what `pi_session_start` runs for a container session
(`--what session`: the launch alone; `--what tool-call`: the whole tool call as the MCP
server makes it, its arguments parsed, the manager's bookkeeping and the answer; of the
profile of `--agent`: pi, claude-code or codex, on the providers of `--only agents`) or
what `mode set --apply` runs for a 10,000-commit repository (`--what mode-set`), with
pyinstrument when it is importable:

    PYTHONPATH=DIR_WITH_PYINSTRUMENT python scripts/bench_profile.py --what session --agent codex

Uses the bench's private world (bench_env.py); prints timings of every repetition
and pyinstrument's wall-clock tree of the last one.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import time
from collections.abc import Iterator
from typing import Any

import anyio
import bench_agents
from bench_env import PROFILE, BenchEnv

from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.pool.modes.change import set_mode
from writerpool.pool.modes.request import ModeRequest
from writerpool.runtime.hosts import open_host
from writerpool.sessions.calls import ToolService
from writerpool.sessions.launch import Launcher
from writerpool.sessions.placement import SessionPlan, plan_session


@contextlib.contextmanager
def profiled(enabled: bool) -> Iterator[Any]:
    try:
        from pyinstrument import Profiler  # noqa: PLC0415
    except ImportError:
        enabled = False
    if not enabled:
        yield None
        return
    profiler = Profiler(interval=0.001)
    profiler.start()
    try:
        yield profiler
    finally:
        profiler.stop()


def show(profiler: Any) -> None:
    if profiler is not None:
        print(profiler.output_text(unicode=True, color=False, show_all=False))


@contextlib.contextmanager
def agents_world(env: BenchEnv) -> Iterator[None]:
    """The providers and the one writer of `--only agents`, while the block runs."""
    with bench_agents.providers(env):
        env.add_workspace(bench_agents.ALIAS, 10, writers=1)
        env.write_config()
        env.wp_ok("control", "--apply")
        bench_agents.prepare(env)
        yield


def session_starts(env: BenchEnv, reps: int, agent: str) -> None:
    with agents_world(env):
        loaded = load_config(env.paths)
        profile = bench_agents.PROFILES[agent]
        plan = plan_session(loaded.config, load_modes(env.paths), bench_agents.ALIAS, profile,
                            None)  # fmt: skip
        _launches(Launcher(env.paths, loaded), plan, reps)


def tool_calls(env: BenchEnv, reps: int, agent: str) -> None:
    with agents_world(env):
        service = ToolService(env.paths)
        start = {"workspace": bench_agents.ALIAS, "executionProfile": bench_agents.PROFILES[agent]}
        for n in range(reps):
            with profiled(n == reps - 1) as profiler:
                began = time.perf_counter()
                body = anyio.run(service.call, "pi_session_start", start)
                took = time.perf_counter() - began
            print(f"call {n}: {took:.3f} s")
            sid = body["session"]["sessionId"]
            anyio.run(service.call, "pi_session_close", {"sessionId": sid})
            show(profiler)
        assert service.manager is not None
        service.manager.shutdown()


def _launches(launcher: Launcher, plan: SessionPlan, reps: int) -> None:
    for n in range(reps):
        with profiled(n == reps - 1) as profiler:
            began = time.perf_counter()
            launched = launcher.launch(plan, f"s{n}")
            took = time.perf_counter() - began
        print(f"start {n}: {took:.3f} s")
        launcher.stop(launched, 10)
        show(profiler)


def mode_sets(env: BenchEnv, reps: int) -> None:
    env.add_workspace("big", 10_000, writers=1)
    env.write_config()
    env.wp_ok("control", "--apply")
    request = ModeRequest(alias="big", mode="container", profiles=(PROFILE,), apply=True)
    for n in range(reps):
        shutil.rmtree(env.paths.writer_dir("big-w1"), ignore_errors=True)
        with profiled(n == reps - 1) as profiler:
            began = time.perf_counter()
            report = set_mode(env.paths, open_host(), load_config(env.paths), request)
            took = time.perf_counter() - began
        print(f"mode set {n}: {took:.3f} s, {report.codes()}")
        show(profiler)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--what", choices=("session", "tool-call", "mode-set"), default="session")
    parser.add_argument("--agent", choices=tuple(bench_agents.PROFILES), default="pi")
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    env = BenchEnv.create()
    try:
        if args.what == "session":
            session_starts(env, args.reps, args.agent)
        elif args.what == "tool-call":
            tool_calls(env, args.reps, args.agent)
        else:
            mode_sets(env, args.reps)
    finally:
        env.close()


if __name__ == "__main__":
    main()
