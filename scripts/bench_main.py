"""scripts/bench: writerpool measured against the bare tools it is built on.

Prints one line per figure, `name: ratio (ours X s / baseline Y s)`, and writes every
sample to a JSON file. Runs in a private config/state directory (see bench_env.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import bench_agents
import bench_dirty
import bench_node
from bench_agents import agent_figures, agent_line
from bench_connect import connect_figure, paced_line
from bench_dirty import DIRTY_FILES, dirty_figure
from bench_env import PROFILE, BenchEnv
from bench_figures import (
    POOL_SIZE,
    Figure,
    collect_figure,
    contention_figure,
    provision_figures,
    session_figures,
)
from bench_guard import GUARD_FILES, guard_figure
from bench_proxy import first_byte_line, proxy_figure
from bench_remote import remote_figures, start_line
from bench_startup import startup_figure
from bench_warm import REMOTE_ALIAS, remote_host, warm_figure, warm_line, warm_remote

from writerpool.runtime.image import resolve_image
from writerpool.runtime.podman import podman_env

DEFAULT_JSON = "bench-results.json"
BIG_COMMITS = 10_000
SMALL_COMMITS = 10
# Repetitions per figure: (quick, full).
REPS = {
    "provision": (3, 5),
    "session": (3, 9),
    "pings": (20, 60),
    "contention": (1, 3),
    "collect": (3, 9),
    "guard": (5, 11),
    "dirty": (3, 7),
    "proxy": (10, 30),
    "connect": (5, 15),
    "startup": (11, 31),
    "warm": (20, 25),  # at least 20 claims for a p95
    "remote": (5, 15),
    "agents": (3, 9),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (under 5 min)")
    parser.add_argument("--json", metavar="FILE",
                        help=f"where to write every sample (default: ./{DEFAULT_JSON}, or "
                             "the account's home when the current directory is read-only)")  # fmt: skip
    parser.add_argument("--only", default="", metavar="A,B",
                        help="only these figure groups: provision,session,contention,collect,guard,dirty,proxy,connect,startup,warm,remote,agents")  # fmt: skip
    args = parser.parse_args(argv)
    if os.environ.get("WRITERPOOL_BENCH_QUICK"):
        args.quick = True
    return args


def say(text: str) -> None:
    print(text, flush=True)


def tool_version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=podman_env())
    except OSError:
        return "absent"
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else "unknown"


def running_containers() -> int:
    """Containers of this account now running (other engineers' tests included)."""
    done = subprocess.run(["podman", "ps", "-q"], capture_output=True, text=True, timeout=60,
                          env=podman_env())  # fmt: skip
    return len(done.stdout.split())


def host_facts() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "podman": tool_version(["podman", "version", "--format", "{{.Client.Version}}"]),
        "git": tool_version(["git", "--version"]),
        "loadavg": list(os.getloadavg()),
        "runningContainers": running_containers(),
    }


def setup(env: BenchEnv, groups: set[str]) -> None:
    started = time.perf_counter()
    say(f"setup: generating repositories ({BIG_COMMITS} and {SMALL_COMMITS} commits)")
    env.add_workspace("big", BIG_COMMITS, writers=1)
    env.add_workspace("small", SMALL_COMMITS, writers=1)
    env.add_workspace("pool", SMALL_COMMITS, writers=POOL_SIZE)
    if "guard" in groups:
        env.add_workspace("wide", SMALL_COMMITS, writers=1, files=GUARD_FILES)
    if "dirty" in groups:
        bench_dirty.add_workspaces(env, SMALL_COMMITS)
    if "agents" in groups:
        env.add_workspace(bench_agents.ALIAS, SMALL_COMMITS, writers=1)
    if "warm" in groups:
        env.add_workspace("warm", SMALL_COMMITS, writers=1)
        if remote_host() is not None:
            env.add_workspace(REMOTE_ALIAS, SMALL_COMMITS, writers=1)
    before = bench_node.wanted() if "session" in groups else None
    if before:
        env.add_workspace(bench_node.ALIAS, SMALL_COMMITS, writers=bench_node.WRITERS)
    env.write_config()
    say("setup: isolation control")
    env.wp_ok("control", "--apply")
    if groups & {"session", "contention"}:
        say(f"setup: provisioning and accepting {POOL_SIZE} writers of a small repository")
        env.set_container_mode("pool")
    if before:
        say(f"setup: the writer image with Node.js {before} for the 'before' row of session_start")
        image = bench_node.before_image(env.root, before, resolve_image(env.paths, "default"))
        env.wp_ok("mode", "set", bench_node.ALIAS, "container", "--profiles", PROFILE,
                  "--writers", str(bench_node.WRITERS), "--image", image, "--apply")  # fmt: skip
    if "collect" in groups:
        say("setup: provisioning the small repository's writer")
        env.set_container_mode("small")
        if "provision" not in groups:
            env.set_container_mode("big")
    if "guard" in groups:
        say(f"setup: provisioning a writer of a {GUARD_FILES}-file repository")
        env.set_container_mode("wide")
    if "dirty" in groups:
        say("setup: two pools of two writers")
        bench_dirty.prepare(env)
    if "agents" in groups:
        say("setup: one writer for a pi, a Claude Code and a Codex profile")
        bench_agents.prepare(env)
    if "warm" in groups:
        say("setup: provisioning a writer kept warm (--warm 1)")
        env.set_container_mode("warm", "--warm", "1")
        if REMOTE_ALIAS in env.workspaces:
            say("setup: a writer kept warm on the test host (--hosts th --warm th=1)")
            warm_remote(env)
    say(f"setup took {time.perf_counter() - started:.0f} s")


def _detail(figure: Figure) -> str:
    """A figure's second line, for those that have one."""
    if figure.name == "proxy_overhead":
        return first_byte_line(figure)
    if figure.name == "connect_overhead":
        return paced_line(figure)
    if figure.name == "session_start_dirty_writer":
        return (f"  {DIRTY_FILES} files left in writer 1; the first start after that session: "
                f"{figure.extra['firstStartSeconds']:.2f} s")  # fmt: skip
    if figure.name.removeprefix("session_start_").removeprefix("first_turn_") in (
        bench_agents.PROFILES
    ):
        return agent_line(figure)
    if figure.name == "warm_claim":
        return warm_line(figure)
    if figure.name == "remote_container_start":
        return start_line(figure)
    if figure.name == "pool_contention":
        spread = figure.extra["startSecondsByRound"][-1]
        return (f"  each of the {POOL_SIZE} starts took {spread[0]:.2f} to {spread[-1]:.2f} s; "
                f"distinct writers in every round: {figure.extra['distinctWriters']}; "
                f"audit shows a writer leased twice: {figure.extra['auditLeasedTwice'] or 'never'}")  # fmt: skip
    return ""


def measure(env: BenchEnv, groups: set[str], reps: dict[str, int]) -> list[Figure]:
    """Every figure of the chosen groups, in a fixed order."""
    figures: list[Figure] = []
    if "startup" in groups:
        say("measuring serve_startup")
        figures.append(startup_figure(env, reps["startup"]))
    if "provision" in groups:
        say("measuring provision")
        figures += provision_figures(env, reps["provision"])
    if "session" in groups:
        say("measuring session_start and mcp_overhead")
        figures += anyio.run(session_figures, env, reps["session"], reps["pings"])
    if "warm" in groups:
        say("measuring warm_claim")
        figures.append(warm_figure(env, reps["warm"]))
    if "agents" in groups:
        say("measuring session_start and first_turn per agent (pi, claude-code, codex)")
        figures += anyio.run(agent_figures, env, reps["agents"])
    if "contention" in groups:
        say("measuring pool_contention")
        figures.append(anyio.run(contention_figure, env, reps["contention"]))
    if "collect" in groups:
        say("measuring collect_scaling")
        figures.append(collect_figure(env, reps["collect"]))
    if "guard" in groups:
        say("measuring guard_5000_files")
        figures.append(guard_figure(env, reps["guard"]))
    if "dirty" in groups:
        say("measuring session_start_dirty_writer")
        figures.append(anyio.run(dirty_figure, env, reps["dirty"]))
    if "proxy" in groups:
        say("measuring proxy_overhead")
        figures.append(proxy_figure(reps["proxy"]))
    if "connect" in groups:
        say("measuring connect_overhead")
        figures.append(connect_figure(reps["connect"]))
    if "remote" in groups:
        say(
            "measuring remote_container_start, remote_stream_in, remote_stream_out, "
            "remote_stream_in_api, remote_stream_out_api, remote_provision, remote_collect"
        )
        figures += remote_figures(resolve_image(env.paths, "default"), reps["remote"], env.root)
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    pick = 0 if args.quick else 1
    reps = {k: v[pick] for k, v in REPS.items()}
    groups = set(filter(None, args.only.split(","))) or {
        "provision", "session", "warm", "contention", "collect", "guard", "dirty", "proxy", "connect",
        "startup",
        *(["remote"] if os.environ.get("WRITERPOOL_TESTHOST_URL") else []),
    }  # fmt: skip
    if "warm" in groups:
        groups.add("session")  # warm_claim is read beside the same run's cold session_start
    facts = host_facts()
    say(f"host: {facts['cpus']} cpus, load {' '.join(f'{x:.2f}' for x in facts['loadavg'])}, "
        f"{facts['runningContainers']} containers running, podman {facts['podman']}, "
        f"{facts['git']}")  # fmt: skip
    env = BenchEnv.create()
    figures: list[Figure] = []
    began = time.perf_counter()
    stack = ExitStack()  # what the chosen groups keep running beside the run
    try:
        if "agents" in groups:
            stack.enter_context(bench_agents.providers(env))
        # proxy_overhead, connect_overhead and serve_startup need no writers.
        if groups - {"proxy", "connect", "startup", "remote"}:
            setup(env, groups)
        elif "startup" in groups:
            env.add_workspace("small", SMALL_COMMITS, writers=1)
            env.write_config()
        figures = measure(env, groups, reps)
    finally:
        stack.close()
        env.close()
    facts_after = host_facts()
    say("")
    for figure in figures:
        say(figure.line())
        detail = _detail(figure)
        if detail:
            say(detail)
    say(f"load before/after: {' '.join(f'{x:.2f}' for x in facts['loadavg'])} / "
        f"{' '.join(f'{x:.2f}' for x in facts_after['loadavg'])}; "
        f"measured in {time.perf_counter() - began:.0f} s")  # fmt: skip
    return {
        "schemaVersion": 1,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "repetitions": reps,
        "repositories": {"bigCommits": BIG_COMMITS, "smallCommits": SMALL_COMMITS},
        "hostBefore": facts,
        "hostAfter": facts_after,
        "seconds": time.perf_counter() - began,
        "figures": {f.name: f.to_json() for f in figures},
    }


def results_path(given: str | None) -> Path:
    """Checked before hours of measuring, and before HOME is redirected."""
    out = Path(given or DEFAULT_JSON).absolute()
    if given is None and not os.access(out.parent, os.W_OK):
        out = Path.home() / DEFAULT_JSON
        say(f"the current directory is read-only; results go to {out}")
    if not os.access(out.parent, os.W_OK):
        raise SystemExit(f"bench: cannot write {out}; pass --json FILE in a writable directory")
    return out


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    out = results_path(args.json)
    result = run(args)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    say(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
