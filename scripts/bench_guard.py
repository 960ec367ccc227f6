"""guard_5000_files: the session guard's content check on a clean 5,000-file clone,
against `git status` on the same clone in the same kind of throwaway container.

Both sides pay one `podman run` of the writer image with the clone mounted read-only
and no network; ours then walks the whole work tree, hashes every file against HEAD's
tree in a scratch index and reads the refs and git directory (pool/writer/baseline.py
`writer_problems`, what `_admit` calls after readiness), where `git status` trusts the
clone's index and stat cache.
"""

from __future__ import annotations

from bench_env import BenchEnv, timed
from bench_figures import Figure, interleave

from writerpool.config.models import load_config
from writerpool.pool.writer.baseline import writer_problems
from writerpool.pool.writer.inspect import tool_spec
from writerpool.runtime.hosts import open_host
from writerpool.state.writer import load_state

GUARD_FILES = 5000
WRITER = "wide-w1"


def guard_figure(env: BenchEnv, reps: int) -> Figure:
    figure = Figure("guard_5000_files", goal=2.0,
                    ours_label="session guard content check (writer_problems), clean "
                               f"{GUARD_FILES}-file clone, throwaway container",
                    baseline_label="git status --porcelain on the same clone in the same "
                                   "throwaway container")  # fmt: skip
    podman = open_host()
    state = load_state(env.paths.writer_dir(WRITER))
    assert state is not None
    pool = load_config(env.paths).config.pool
    spec = tool_spec(env.paths, podman, state, pool, "gitstatus")

    def ours(_rep: int) -> float:
        seconds, problems = timed(writer_problems, env.paths, podman, state, pool)
        if problems:
            raise SystemExit(f"bench: the clean clone is not at baseline: {problems}")
        return float(seconds)

    def baseline(_rep: int) -> float:
        seconds, done = timed(podman.run, spec, ["git", "-C", "/work", "status", "--porcelain"],
                              timeout=300)  # fmt: skip
        if done.returncode != 0 or done.stdout.strip():
            raise SystemExit(f"bench: git status failed or not clean: {done.stderr[-300:]!r}")
        return float(seconds)

    ours(0)  # warm: the first run of each side pays for the page cache
    baseline(0)
    interleave(reps, ours, baseline, figure)
    return figure
