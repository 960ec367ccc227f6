"""Which writers a session start tries, and in what order.

A start tries the writers whose current verdict (pool/verdicts.py) is clean first (no
inspection: readiness, the fence and the lease's refresh only), then those not judged
since their last lease, in index order; a writer known to hold only leftovers (which
the lease removes, pool/refresh.py) comes after them, and a writer whose last session
changed the shape of its work tree (verdicts.mark_changed) last: it would be refused,
so a start judges it only when no other writer passes. A writer whose current verdict
refuses it for anything else is not tried at all: nothing has leased it since, so it is
as it was judged. Each writer is judged under its own lease, one at a time, so
concurrent starts spread over the writers.
"""

from __future__ import annotations

import os
from pathlib import Path

from writerpool.config.paths import Paths
from writerpool.pool.admission import LEASABLE
from writerpool.pool.provision import writer_name
from writerpool.pool.verdicts import current, known_changed

# Entries of a work tree counted to tell whether a session changed its shape; past this
# the shape is unknown (both counts capped).
SHAPE_CAP = 20_000
LEFTOVERS_ONLY = "writer_not_at_baseline"  # the lease's refresh clears these


def candidates(paths: Paths, alias: str, writers: int, refusals: list[str]) -> list[str]:
    """The workspace's writers in the order a start tries them (see above); a writer not
    tried is named in `refusals` with its recorded reason. Bounded by `writers`."""
    clean, unknown, leftovers = [], [], []
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
        elif known.code == LEFTOVERS_ONLY:
            leftovers.append(name)
        else:
            refusals.append(f"{name} {known.reason} ({known.code})")
    changed = [n for n in unknown if known_changed(paths.writer_dir(n))]
    return clean + [n for n in unknown if n not in changed] + leftovers + changed


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
