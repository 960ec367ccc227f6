"""Which writers a session start tries, and in what order.

A start tries the writers whose current verdict (pool/writer/verdicts.py) is clean first (no
inspection: readiness, the fence and the lease's refresh only), then those not judged
since their last lease, in index order; a writer known to hold only leftovers (which
the lease removes, pool/claims/refresh.py) comes after them, and a writer whose clone could
not be inspected at its last session's end (verdicts.mark_changed) last: it would be
refused, so a start judges it only when no other writer passes. A writer whose current verdict
refuses it for anything else is not tried at all: nothing has leased it since, so it is
as it was judged. Each writer is judged under its own lease, one at a time, so
concurrent starts spread over the writers.
"""

from __future__ import annotations

from writerpool.config.paths import Paths, WriterRecord
from writerpool.pool.claims.admission import LEASABLE
from writerpool.pool.provision.make import writer_name
from writerpool.pool.writer.verdicts import current, known_changed

LEFTOVERS_ONLY = "writer_not_at_baseline"  # the lease's refresh clears these


def candidates(paths: Paths, alias: str, writers: int, refusals: list[str]) -> list[str]:
    """The workspace's writers in the order a start tries them (see above); a writer not
    tried is named in `refusals` with its recorded reason. Bounded by `writers`."""
    clean, unknown, leftovers = [], [], []
    for index in range(1, writers + 1):
        name = writer_name(alias, index)
        wdir = paths.writer_dir(name)
        if not WriterRecord(wdir).state_file.exists():
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
