"""A writer's work as one digest, and whether a complete collection covers it.

The digest covers what reset or recreate would destroy: branches that are new or
moved relative to the baseline (and branches that cannot be read at all), the tree of
uncommitted and untracked work (judged by content, never by the clone's index), HEAD,
work collection cannot export (nested repositories, `.git` directories below the top,
unreadable paths, files above the caps: each with its path and size) and refs outside
refs/heads (tags too) that reach new history. Other tags the agent made are not work:
they are never collected and do not change the digest. Ignored files, special files and empty
directories are not work either (reset removes them without --discard). A stash is
never collected, so it always counts as uncollected.
"""

from __future__ import annotations

import hashlib
import json

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.inspect import Inspection, inspect_writer
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import Baseline, WriterState


def changed_branches(inspection: Inspection, baseline: Baseline) -> dict[str, str]:
    """Branches that are new or moved (name -> commit), and unreadable ones (-> "!why")."""
    changed = {
        name: commit
        for name, commit in inspection.branches.items()
        if baseline.branches.get(name) != commit
    }
    changed.update({name: f"!{why}" for name, why in inspection.problems.items()})
    return changed


def holds_work(inspection: Inspection, baseline: Baseline) -> bool:
    """Anything reset would lose: changed branches, WIP, or commits only HEAD reaches."""
    detached = any(e.kind == "detached" for e in inspection.exports)
    changed = bool(changed_branches(inspection, baseline))
    unexported = inspection.unexported_count > 0 or bool(inspection.new_extra_refs)
    return changed or inspection.dirty or inspection.unreadable or detached or unexported


def work_digest(inspection: Inspection, baseline: Baseline) -> str | None:
    """sha256 over the work; None when the clone holds none."""
    if not holds_work(inspection, baseline):
        return None
    document: dict[str, object] = {
        "head": inspection.head,
        "headCommit": inspection.head_commit,
        "branches": changed_branches(inspection, baseline),
        "wipTree": inspection.wip_tree,
        "unreadable": inspection.unreadable,
    }
    # Added only when present, so a digest recorded before these existed still matches.
    if inspection.unexported_count:
        document["unexported"] = inspection.unexported_digest
    if inspection.new_extra_refs:
        document["extraRefs"] = sorted(inspection.new_extra_refs)
    # ensure_ascii keeps undecodable name bytes (kept as surrogates) digestible.
    blob = json.dumps(document, sort_keys=True, ensure_ascii=True).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def uncollected_reason(inspection: Inspection, state: WriterState) -> str | None:
    """Why destroying this clone would lose work, or None when nothing would be lost."""
    if state.baseline is None:
        return None
    if inspection.stash:
        return "a stash exists; stashes are never collected"
    digest = work_digest(inspection, state.baseline)
    if digest is None:
        return None
    collection = state.collection
    if collection is None:
        return "the writer holds work that was never collected"
    if not collection.complete:
        return "the last collection was incomplete"
    if collection.digest != digest:
        return "the work changed since the last complete collection"
    return None


def has_uncollected_work(paths: Paths, host: WriterHost, state: WriterState, pool: Pool) -> bool:
    """True unless the clone's current work digest equals the last complete collection's.

    Inspects the clone in a throwaway container; raises (writer_inspect_failed,
    image_unavailable, ...) when that cannot be done, so callers fail closed.
    """
    if state.baseline is None or not host.storage_present(writer_of(paths, state), "clone"):
        return False  # never handed to a session, or no clone left: nothing to lose
    inspection = inspect_writer(paths, host, state, pool)
    return uncollected_reason(inspection, state) is not None


def discarded(inspection: Inspection, baseline: Baseline) -> str:
    """What a --discard loses, in words: branches by name, the WIP, stash, other work."""
    parts = []
    changed = changed_branches(inspection, baseline)
    if changed:
        names = [ascii(n)[1:-1][:60] for n in sorted(changed)]
        more = f" and {len(names) - 8} more" if len(names) > 8 else ""
        parts.append("branch(es) " + ", ".join(names[:8]) + more)
    if inspection.dirty:
        parts.append("uncommitted and untracked changes (see `writer diff NAME --wip --stat`)")
    if inspection.stash:
        parts.append("a stash")
    if inspection.unexported_count:
        shown = ", ".join(ascii(e.path)[1:-1][:60] for e in inspection.unexported[:3])
        parts.append(f"{inspection.unexported_count} path(s) collection cannot carry ({shown})")
    if inspection.new_extra_refs:
        parts.append(f"{len(inspection.new_extra_refs)} ref(s) outside refs/heads")
    if any(e.kind == "detached" for e in inspection.exports):
        parts.append("commits only the detached HEAD reaches")
    return "; ".join(parts) or "nothing beyond the baseline"
