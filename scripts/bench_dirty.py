"""session_start_dirty_writer: pi_session_start in a pool where one writer holds 300,000
small files its last session left, against pi_session_start in a pool of clean writers.

Both pools have two writers of the same small repository, and each start is closed at
once. In the dirty pool a first session takes writer 1 and, while it runs, 300,000
small files appear in its clone (written from the host, as the agent would leave them);
when that session closes, its writer is known changed, so the starts measured after it
take writer 2 without inspecting writer 1. The first start after the dirtying session
is kept apart too (`firstStartSeconds`).
"""

from __future__ import annotations

import time
from pathlib import Path

from bench_env import PROFILE, BenchEnv
from bench_figures import Figure
from bench_mcp import connect

DIRTY_FILES = 300_000
CLEAN, DIRTY = "twoclean", "twodirty"
WRITERS = 2


def add_workspaces(env: BenchEnv, commits: int) -> None:
    env.add_workspace(CLEAN, commits, writers=WRITERS)
    env.add_workspace(DIRTY, commits, writers=WRITERS)


def prepare(env: BenchEnv) -> None:
    env.set_container_mode(CLEAN)
    env.set_container_mode(DIRTY)


def leave_files(clone: Path) -> None:
    """DIRTY_FILES small files in 300 directories, as an agent's build could leave them."""
    top = clone / "left-behind"
    for index in range(DIRTY_FILES):
        folder = top / f"d{index // 1000:03d}"
        if index % 1000 == 0:
            folder.mkdir(parents=True)
        (folder / f"f{index:06d}.txt").write_bytes(b"x\n")


async def dirty_figure(env: BenchEnv, reps: int) -> Figure:
    figure = Figure("session_start_dirty_writer", goal=1.1,
                    ours_label=f"pi_session_start, {WRITERS} writers, one holding "
                    f"{DIRTY_FILES} small files",
                    baseline_label=f"pi_session_start, {WRITERS} clean writers")  # fmt: skip
    taken: list[str] = []
    async with connect(env.server_env(), env.root, env.root / "serve-dirty.log") as client:

        async def start(alias: str) -> float:
            seconds, session = await client.start_session(alias, PROFILE)
            if alias == DIRTY:
                taken.append(str(session.get("writer")))
            await client.close_session(session["sessionId"])
            return seconds

        _, dirtying = await client.start_session(DIRTY, PROFILE)
        if dirtying.get("writer") != f"{DIRTY}-w1":
            raise SystemExit(f"bench: the first session took {dirtying.get('writer')}")
        leave_files(env.clone_dir(f"{DIRTY}-w1"))
        await client.close_session(dirtying["sessionId"])
        began = time.perf_counter()
        figure.extra["firstStartSeconds"] = await start(DIRTY)
        await start(CLEAN)
        figure.load.append(_load())
        for rep in range(reps):
            order = [DIRTY, CLEAN] if rep % 2 == 0 else [CLEAN, DIRTY]
            for alias in order:
                seconds = await start(alias)
                (figure.ours if alias == DIRTY else figure.baseline).append(seconds)
        figure.load.append(_load())
        figure.extra["measuredSeconds"] = time.perf_counter() - began
    figure.extra["dirtyPoolWritersTaken"] = taken
    if f"{DIRTY}-w1" in taken:
        raise SystemExit("bench: a session took the dirty writer")
    return figure


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
