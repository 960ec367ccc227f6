"""Is a writer exactly at its baseline? One answer for the session guard, `writer list`,
and reset's and recreate's verification.

Judged by content (pool/inspect.py `baseline_problems`, computed in a throwaway
container on the writer's host): the base tree with every tracked file's content equal
to it, the baseline's refs only, no stash, no other worktree, nothing else in the work
tree (ignored or not), no git state a fresh clone lacks, and its git settings (the same
inspection's view of `.git`, judged by gitops/verify.py). Here the host adds the
writer's cache, which must be empty unless `[pool] keep_caches` keeps it.
"""

from __future__ import annotations

import os

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.clonetool.removal import remove_path
from writerpool.pool.container import writer_of
from writerpool.pool.inspect import Inspection, baseline_problems, inspect_writer
from writerpool.runtime.host import WriterHost
from writerpool.state.atomic import ensure_private_dir
from writerpool.state.writer import WriterState


def cache_problem(paths: Paths, state: WriterState, pool: Pool) -> str | None:
    """Why the writer's cache is not the baseline's (empty), or None."""
    if state.cache == "none" or pool.keep_caches:
        return None
    cache = writer_of(paths, state).cache
    try:
        with os.scandir(cache) as entries:
            held = any(True for _ in entries)
    except FileNotFoundError:
        return None
    except OSError:
        return "the cache directory cannot be read"
    return "the cache is not empty (reset clears it)" if held else None


def clear_cache(paths: Paths, state: WriterState, pool: Pool) -> None:
    """Empty the writer's cache unless the operator keeps caches across sessions."""
    if state.cache == "none" or pool.keep_caches:
        return
    cache = writer_of(paths, state).cache
    try:
        remove_path(cache)
    except OSError as exc:
        raise WriterpoolError("writer_reset_failed", "the cache cannot be cleared") from exc
    ensure_private_dir(cache)


def writer_problems(paths: Paths, host: WriterHost, state: WriterState, pool: Pool) -> list[str]:
    """Why the writer is not at its baseline (empty: it is). The caller holds the lease,
    or accepts that a session may be changing the clone meanwhile (`writer list`)."""
    if state.baseline is None:
        return problems_given(paths, state, pool, None)
    return problems_given(paths, state, pool, inspect_writer(paths, host, state, pool))


def problems_given(
    paths: Paths, state: WriterState, pool: Pool, inspection: Inspection | None
) -> list[str]:
    """writer_problems over an inspection already made (None: the writer has no baseline)."""
    if state.baseline is None or inspection is None:
        return ["the writer was never fully provisioned"]
    unsafe = inspection.clone_problems
    problems = ["unsafe clone: " + ", ".join(unsafe[:5])] if unsafe else []
    problems += baseline_problems(inspection, state.baseline)
    cache = cache_problem(paths, state, pool)
    return problems + ([cache] if cache else [])
