"""May a session have this writer now? The one judgement the session guard,
`writer status` and `writer list` share.

Readiness first (accepted under the current settings), then the clone by content
(pool/writer/baseline.py: exactly its baseline, cache empty). A clone that is not at its
baseline is told apart by what it holds: work no complete collection covers
(`writer_holds_work`), work a complete collection covers but no finish or reset has
cleared (`writer_collected_unfinished`), or no work but leftovers
(`writer_not_at_baseline`).
"""

from __future__ import annotations

from dataclasses import dataclass

from writerpool.config.models import Config, Pool
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.accept import readiness
from writerpool.pool.writer.baseline import problems_given
from writerpool.pool.writer.inspect import Inspection, inspect_writer
from writerpool.pool.writer.verdicts import Verdict
from writerpool.pool.writer.work import uncollected_reason, work_digest
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import WriterState

LEASABLE = "writer_leasable"
REASONS = {
    "writer_holds_work": "holds work no complete collection covers",
    "writer_collected_unfinished": "its work was collected, but finish or reset has not run",
    "writer_not_at_baseline": "not at its baseline (no work, but leftovers)",
    "writer_settings_changed": "provisioned with other settings than the workspace's",
    "writer_acceptance_stale": "accepted under settings that are no longer current",
    "isolation_control_required": "no passing isolation control",
    "writer_provisioned": "provisioned but not accepted",
    "writer_busy": "held by a session or an operator command",
    "writer_warm": "kept warm by the pool service: a session claims it, an operator command "
    "makes the service yield it",
}


@dataclass(frozen=True)
class Admission:
    """The verdict: `code` is writer_leasable or why not; `reason` is path-free."""

    code: str
    reason: str
    problems: tuple[str, ...] = ()
    inspection: Inspection | None = None
    readiness: str | None = None  # the readiness reason when the writer is not ready
    phase: str = "ready"  # the readiness phase as of now

    @property
    def leasable(self) -> bool:
        return self.code == LEASABLE


def _work_verdict(state: WriterState, inspection: Inspection) -> tuple[str, str]:
    assert state.baseline is not None
    if inspection.stash:
        return "writer_holds_work", "holds a stash (stashes are never collected)"
    if work_digest(inspection, state.baseline) is None:
        return "writer_not_at_baseline", REASONS["writer_not_at_baseline"]
    why = uncollected_reason(inspection, state)
    if why is None:
        return "writer_collected_unfinished", REASONS["writer_collected_unfinished"]
    return "writer_holds_work", why


def admit(
    paths: Paths, host: WriterHost, config: Config, state: WriterState, *, full: bool = False,
    role: str = "inspect", known: Verdict | None = None,
) -> Admission:  # fmt: skip
    """Why the writer cannot take a session now, or writer_leasable. The caller holds the
    lease, or asks as a view (role VIEW) and accepts a session changing the clone
    meanwhile. With `full`, the clone is inspected even when readiness already refuses,
    so its work can be shown. `known`, a current verdict on the clone
    (pool/writer/verdicts.py), stands in for the inspection."""
    phase, reason = readiness(paths, host, state, config)
    pool = config.pool
    not_ready = None if phase == "ready" else (reason or "writer_not_ready")
    if not_ready is not None and (not full or state.baseline is None):
        text = REASONS.get(not_ready, f"not ready ({not_ready})")
        return Admission(not_ready, text, readiness=not_ready, phase=phase)
    if not_ready is None and known is not None:
        return Admission(known.code, known.reason, known.problems)
    # By content, not by what git reports: an ignored file, a forged index, a FIFO or a
    # planted ref would otherwise carry one session's state into the next. Also catches
    # a `.git` renamed away and rebuilt with the agent's own hooks and settings.
    inspection = inspect_writer(paths, host, state, pool, role) if state.baseline else None
    problems = tuple(problems_given(state, pool, inspection))
    if not_ready is not None:
        text = REASONS.get(not_ready, f"not ready ({not_ready})")
        return Admission(not_ready, text, problems, inspection, not_ready, phase)
    return _judged(state, problems, inspection)


def _judged(
    state: WriterState, problems: tuple[str, ...], inspection: Inspection | None
) -> Admission:
    if not problems:
        return Admission(LEASABLE, "a session can have it", (), inspection)
    code, text = "writer_not_at_baseline", REASONS["writer_not_at_baseline"]
    if inspection is not None:
        code, text = _work_verdict(state, inspection)
    return Admission(code, text, problems, inspection)


def clone_verdict(paths: Paths, state: WriterState, pool: Pool, inspection: Inspection) -> Verdict:
    """The clone's part of admit() for an inspection already made under the lease (at a
    session's close): what the next start's guard would find, to be remembered."""
    judged = _judged(state, tuple(problems_given(state, pool, inspection)), inspection)
    return Verdict(judged.code, judged.reason, judged.problems)
