"""Before a session: leftovers go, and the writer follows its base.

A writer that holds no work but is not at its baseline (ignored files, a tool cache,
empty directories, tags: `writer_not_at_baseline`), or whose base branch moved since its
baseline, is reset under the lease onto the base's current commit: the same reset and
verification by content as `writer reset NAME --apply` (objects come in as a bundle the
throwaway container fetches). Nothing is lost: reset without --discard runs only when no
work is held. Work (anything collection exports) is never touched here, and neither is a clone
whose git settings or hooks were tampered with: such a writer is refused as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef
from writerpool.gitops.hostgit import CommandFailed, git
from writerpool.pool.claims.admission import LEASABLE, Admission
from writerpool.pool.provision.rebuild import reset_clone
from writerpool.report import Report, sanitize
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import WriterState

LEFTOVERS_ONLY = "writer_not_at_baseline"
UNSAFE = "unsafe clone"  # pool/writer/baseline.py's words for what gitops/verify.py refuses
_HASH = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


@dataclass(frozen=True)
class Refresh:
    """What the lease does before handing a writer over (nothing when not `needed`)."""

    leftovers: tuple[str, ...]  # why the clone is not at its baseline (no work)
    current: BaseRef  # the base branch as the checkout has it now
    baseline_commit: str  # the commit the writer's baseline is on
    behind: int  # commits the base branch gained since then

    @property
    def moved(self) -> bool:
        return self.current.commit != self.baseline_commit

    @property
    def needed(self) -> bool:
        return bool(self.leftovers) or self.moved

    def text(self) -> str:
        """In words, what the lease does (empty when nothing)."""
        parts = []
        if self.leftovers:
            parts.append("removes leftovers (" + "; ".join(self.leftovers)[:300] + ")")
        if self.moved:
            parts.append(f"moves it to {self.current.name} at {self.current.commit[:12]}")
        return "at lease: " + " and ".join(parts) if parts else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "leftovers": [sanitize(p) for p in self.leftovers],
            "behind": self.behind,
            "moveTo": self.current.commit if self.moved else None,
        }


def checkout_of(loaded: LoadedConfig, alias: str) -> Path:
    """The workspace's checkout, whose base branches the writers follow."""
    repo = loaded.config.workspaces.get(alias)
    if repo is None:
        raise WriterpoolError("alias_unknown", f"workspace {alias} is not configured")
    return repo


def behind_by(repo: Path, old: str, new: str) -> int:
    """Commits `new` has that `old` lacks, counted in the operator's checkout (0: unknown)."""
    if old == new or not (_HASH.fullmatch(old) and _HASH.fullmatch(new)):
        return 0
    try:
        done = git(repo, "rev-list", "--count", f"{old}..{new}", "--", timeout=120, check=False)
    except CommandFailed:
        return 0
    text = done.out.strip()
    return int(text) if done.returncode == 0 and text.isdigit() else 0


def plan_refresh(
    repo: Path, state: WriterState, verdict: Admission, current: BaseRef
) -> Refresh | None:
    """What the lease would do to this writer, whose base resolves to `current` now
    (gitops/base.py resolve_base, once by the caller); None when the verdict refuses it
    for anything but leftovers (work, readiness, a busy lease)."""
    if verdict.code not in (LEASABLE, LEFTOVERS_ONLY):
        return None
    # Planted hooks or settings are tampering, not leftovers: the operator sees them.
    if any(p.startswith(UNSAFE) for p in verdict.problems):
        return None
    leftovers = verdict.problems if verdict.code == LEFTOVERS_ONLY else ()
    behind = behind_by(repo, state.base.commit, current.commit)
    return Refresh(leftovers, current, state.base.commit, behind)


def apply_refresh(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, state: WriterState, plan: Refresh
) -> WriterState:
    """Reset the clone onto the base's current commit and verify it. The caller holds
    the lease and has proven no stray container runs. Raises writer_refresh_failed."""
    report = Report("lease")
    state = reset_clone(paths, host, loaded, state, plan.current, report)
    failed = [f for f in report.findings if f.status == "error"]
    if failed or state.base.commit != plan.current.commit:
        why = failed[0].message if failed else "the clone is not on the base's commit"
        raise WriterpoolError("writer_refresh_failed", sanitize(why)[:300])
    return state
