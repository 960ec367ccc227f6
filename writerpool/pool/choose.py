"""Which writer a session start takes: known verdicts first, writers known changed last.

A start tries the writers whose current verdict (pool/verdicts.py) is clean first (no
inspection: only readiness and the fence), does not try those whose current verdict
refuses them, and judges the others in index order, one at a time under each one's
lease (so concurrent starts spread over the writers). Among those, a writer whose
session is known to have changed the shape of its work tree (verdicts.mark_changed)
goes last: it would be refused, so a start judges it only when no other writer passes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from writerpool.config.models import Config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.admission import LEASABLE, admit
from writerpool.pool.fence import fence
from writerpool.pool.lease import Lease
from writerpool.pool.provision import writer_name
from writerpool.pool.verdicts import (
    Verdict,
    advance,
    current,
    known_changed,
    lease_count,
    remember,
)
from writerpool.runtime.podman import Podman
from writerpool.state.writer import WriterState, load_state

log = logging.getLogger(__name__)

# Entries of a work tree counted to tell whether a session changed its shape; past this
# the shape is unknown (both counts capped).
SHAPE_CAP = 20_000


@dataclass
class Trial:
    """One writer tried: its lease and state when it passed, else why not."""

    name: str
    lease: Lease | None = None
    state: WriterState | None = None
    refusal: str | None = None


def candidates(
    paths: Paths, alias: str, writers: int, refusals: list[str]
) -> tuple[list[str], list[str]]:
    """(writers known clean, writers not judged since their last lease), in index order,
    those known changed last. A writer whose current verdict refuses it is only named in
    `refusals`: nothing has leased it since, so it is as it was judged. Bounded by the
    workspace's writer count."""
    clean, unknown = [], []
    for index in range(1, writers + 1):
        name = writer_name(alias, index)
        wdir = paths.writer_dir(name)
        if not (wdir / "state.json").exists():
            continue
        known = current(wdir)
        if known is None:
            unknown.append(name)
        elif known.code == LEASABLE:
            clean.append(name)
        else:
            refusals.append(f"{name} {known.reason} ({known.code})")
    return clean, sorted(unknown, key=lambda n: known_changed(paths.writer_dir(n)))


def tree_entries(top: Path, cap: int = SHAPE_CAP) -> int:
    """Entries below `top` (its `.git` aside), counted up to `cap`: links not followed,
    an unreadable directory counted as `cap` (the shape is then unknown). Bounded by
    `cap` entries."""
    seen = 0
    pending = [top]
    while pending:
        current_dir = pending.pop()
        try:
            with os.scandir(current_dir) as listing:
                for entry in listing:
                    if current_dir == top and entry.name == ".git":
                        continue
                    seen += 1
                    if seen >= cap:
                        return cap
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
        except OSError:
            return cap
    return seen


def _judge(paths: Paths, podman: Podman, config: Config, state: WriterState) -> str | None:
    """Why the writer cannot take a session now (None: it can); the lease is held. A
    current verdict stands in for the inspection; a verdict of the clone is recorded."""
    wdir = paths.writer_dir(state.name)
    count = lease_count(wdir)  # stable: the lease is held
    verdict = admit(paths, podman, config.pool, state, known=current(wdir))
    if verdict.readiness is None:
        remember(wdir, count, Verdict(verdict.code, verdict.reason, verdict.problems))
    if verdict.leasable:
        return None
    if verdict.problems:
        log.info("writer %s: %s", state.name, "; ".join(verdict.problems)[:500])
    return f"{verdict.reason} ({verdict.code})"


def trial(paths: Paths, podman: Podman, config: Config, name: str, wanted: str) -> Trial:
    """Lease the writer (without waiting) and judge it; the lease is kept only when it passes."""
    lease = Lease(paths.writer_dir(name))
    try:
        lease.acquire(wait=0, judging=True)
    except WriterpoolError as exc:
        return Trial(name, refusal=exc.code)  # busy with a session or a command
    try:
        state = load_state(paths.writer_dir(name))
        if state is None or state.base.name != wanted:
            lease.release()
            return Trial(name, refusal=None if state is None else f"is on base {state.base.name}")
        fence(podman, name, lease)
        refusal = _judge(paths, podman, config, state)
    except WriterpoolError as exc:
        refusal = exc.code
    except BaseException:
        lease.release()  # a bug: never leave the writer held by a forgotten lease
        raise
    if refusal is not None:
        log.info("writer %s not leased: %s", name, refusal)
        lease.release()
        return Trial(name, refusal=refusal)
    return Trial(name, lease, state)


def choose(
    paths: Paths, podman: Podman, config: Config, alias: str, writers: int, wanted: str,
    refusals: list[str],
) -> Trial | None:  # fmt: skip
    """The writer a start takes, leased and judged (its clone may change from now on),
    or None with every writer's reason in `refusals`."""
    clean, unknown = candidates(paths, alias, writers, refusals)
    for name in clean + unknown:
        got = trial(paths, podman, config, name, wanted)
        if got.lease is not None:
            advance(paths.writer_dir(name))  # a session will change the clone
            return got
        if got.refusal is not None:
            refusals.append(f"{name} {got.refusal}")
    return None
