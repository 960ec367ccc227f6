"""warm_claim: a session claiming a warm writer (pool/warm.py), from the start call to
the answer, against a cold start of the same kind of session, both in process through
the session launcher (sessions/launch.py `Launcher.launch`).

Ours: `Launcher.launch` with a `WarmPool` holding one warm writer (container running,
pi started and idle, no provider access): the claim's checks, the session's egress
grant (its proxy process started ahead as a spare), and pi's new_session, set_model and
set_thinking_level. Baseline: `Launcher.launch` without a warm pool: lease, fence,
guard, egress and pi's start in a new container. Goals: p50 <= 0.1 s, p95 <= 0.2 s.
Between samples the session is stopped and the pool warms the writer again (not timed).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from bench_env import PROFILE, BenchEnv, timed
from bench_figures import Figure, interleave

from writerpool.agent.egress import Proxied
from writerpool.agent.pi import PiAgent
from writerpool.config.models import load_config
from writerpool.pool.warm import WarmPool
from writerpool.sessions.launch import Launcher
from writerpool.sessions.placement import SessionPlan

ALIAS = "warm"
P50_GOAL = 0.1
P95_GOAL = 0.2


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def warm_line(figure: Figure) -> str:
    p50 = statistics.median(figure.ours)
    p95 = _percentile(figure.ours, 0.95)
    met = p50 <= P50_GOAL and p95 <= P95_GOAL
    parts = ", ".join(
        f"{k} {v * 1000:.0f} ms"
        for k, v in figure.extra.get("claimPhasesMedianSeconds", {}).items()
    )
    return (f"  warm_claim p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms over "
            f"{len(figure.ours)} claims  [goal p50 <= {P50_GOAL * 1000:.0f} ms, p95 <= "
            f"{P95_GOAL * 1000:.0f} ms: {'met' if met else 'MISSED'}]\n  medians: {parts}")  # fmt: skip


PHASES: dict[str, list[float]] = {}


def _timing(owner: Any, attribute: str, label: str) -> Callable[[], None]:
    """Wrap owner.attribute to record how long each call takes under `label` (this
    process only); returns what undoes it."""
    original = getattr(owner, attribute)

    def timed_call(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            PHASES.setdefault(label, []).append(time.perf_counter() - began)

    setattr(owner, attribute, timed_call)
    return lambda: setattr(owner, attribute, original)


def _phases(figure: Figure) -> None:
    """Median seconds of each part of a claim, for the JSON (where the time goes)."""
    figure.extra["claimPhasesMedianSeconds"] = {
        k: round(statistics.median(v), 4) for k, v in PHASES.items() if v
    }


def warm_figure(env: BenchEnv, reps: int) -> Figure:
    figure = Figure("warm_claim",
                    ours_label="Launcher.launch claiming a warm writer (checks, egress "
                               "grant, pi new_session/set_model/set_thinking_level)",
                    baseline_label="Launcher.launch of the same session, cold (lease, "
                                   "fence, guard, egress, container and pi start)")  # fmt: skip
    loaded = load_config(env.paths)
    ws = env.workspaces[ALIAS]
    plan = SessionPlan(
        workspace=ALIAS, workspace_dir=ws.repo, profile_name=PROFILE,
        profile=loaded.config.profiles[PROFILE], placement="container", read_only=False,
        base=None,
    )  # fmt: skip
    pool = WarmPool(env.paths, loaded)
    warm = Launcher(env.paths, loaded, warm=pool)
    cold = Launcher(env.paths, loaded)

    def sample(launcher: Launcher, rep: int, claim: bool) -> float:
        if claim and not pool.fill() and not pool.warm_names(ALIAS):
            raise SystemExit("bench: no writer of the warm workspace could be warmed")
        seconds, launched = timed(
            launcher.launch, plan, f"bench-{'warm' if claim else 'cold'}-{rep}"
        )
        try:
            if claim and launched.writer is None:
                raise SystemExit("bench: the warm claim gave no writer")
        finally:
            launcher.stop(launched, 10.0)
        return float(seconds)

    undo = [
        _timing(WarmPool, "claim", "claim checks"),
        _timing(Launcher, "_grant", "egress grant"),
        _timing(PiAgent, "configure", "pi new_session, set_model, set_thinking_level"),
        _timing(Proxied, "ready", "egress ready"),
    ]
    try:
        sample(warm, -1, True)  # the first of each side pays for imports and page cache
        sample(cold, -1, False)
        interleave(reps, lambda r: sample(warm, r, True), lambda r: sample(cold, r, False),
                   figure)  # fmt: skip
        _phases(figure)
    finally:
        for step in undo:
            step()
        pool.close()
        warm.shutdown()
        cold.shutdown()
    return figure
