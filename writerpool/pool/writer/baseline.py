"""Is a writer exactly at its baseline? One answer for the session guard, `writer list`,
and reset's and recreate's verification.

Judged by content (pool/writer/inspect.py `baseline_problems`, computed in a throwaway
container on the writer's host): the base tree with every tracked file's content equal
to it, the baseline's refs only, no stash, no other worktree, nothing else in the work
tree (ignored or not), no git state a fresh clone lacks, and its git settings (the same
inspection's view of `.git`, judged by gitops/verify.py), and the writer's cache, which
must be empty unless `[pool] keep_caches` keeps it (the same container looks at it).
"""

from __future__ import annotations

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.pool.writer.inspect import (
    Inspection,
    baseline_problems,
    cache_cleared,
    inspect_writer,
)
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import WriterState


def cache_problem(state: WriterState, pool: Pool, inspection: Inspection) -> str | None:
    """Why the writer's cache is not the baseline's (empty), or None: as the inspection's
    container saw it on the writer's host."""
    if not cache_cleared(state, pool):
        return None
    if inspection.cache == "empty":
        return None
    if inspection.cache == "held":
        return "the cache is not empty (reset clears it)"
    if inspection.cache == "unreadable":
        return "the cache directory cannot be read"
    return "the cache was not inspected"


def writer_problems(paths: Paths, host: WriterHost, state: WriterState, pool: Pool) -> list[str]:
    """Why the writer is not at its baseline (empty: it is). The caller holds the lease,
    or accepts that a session may be changing the clone meanwhile (`writer list`)."""
    if state.baseline is None:
        return problems_given(state, pool, None)
    return problems_given(state, pool, inspect_writer(paths, host, state, pool))


def problems_given(state: WriterState, pool: Pool, inspection: Inspection | None) -> list[str]:
    """writer_problems over an inspection already made (None: the writer has no baseline)."""
    if state.baseline is None or inspection is None:
        return ["the writer was never fully provisioned"]
    unsafe = inspection.clone_problems
    problems = ["unsafe clone: " + ", ".join(unsafe[:5])] if unsafe else []
    problems += baseline_problems(inspection, state.baseline)
    cache = cache_problem(state, pool, inspection)
    return problems + ([cache] if cache else [])
