"""Lock files git left on a writer's review refs.

git takes `<ref>.lock` beside each ref a transaction changes and removes it when the
transaction ends; a collection killed inside one (`update-ref`, the bundle's fetch)
leaves its locks, and every later transaction on those refs fails on them. Those refs
(`refs/remotes/writer-<name>/` and the moved-aside `writer-<name>@<time>/`) are written
only by this writer's collections, under the writer's lease: a lock there that stays
while a collection holds the lease was left by a killed one, and the collection removes
it (and says so) before its own transaction. A lock elsewhere (a branch, `packed-refs`)
is the operator's business and is never touched: the transaction's refusal names it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.gitops.hostgit import CommandFailed, git, git_reason
from writerpool.report import Report

# git holds a ref's lock for moments; one this old, under the writer's lease, is stale.
SETTLE_SECONDS = 2.0


def _remotes_dir(repo: Path) -> Path:
    """The checkout's `refs/remotes` directory (in the common dir of a worktree)."""
    try:
        done = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir", timeout=60)
    except CommandFailed as exc:
        raise WriterpoolError(
            "writer_collect_failed", f"checkout unreadable: {git_reason(exc)}"
        ) from exc
    return Path(done.out.strip()) / "refs" / "remotes"


def review_ref_locks(remotes: Path, name: str) -> list[Path]:
    """Every `*.lock` file under the writer's review-ref namespaces in `remotes`.
    Bounded by the files under those namespaces; links are not followed."""
    if not remotes.is_dir():
        return []
    roots = [remotes / f"writer-{name}", *remotes.glob(f"writer-{name}@*")]
    found = []
    for root in roots:  # the current namespace and one per moved-aside collection
        if root.is_symlink() or not root.is_dir():
            continue
        for folder, _dirs, files in os.walk(root):
            found += [Path(folder) / f for f in files if f.endswith(".lock")]
    return sorted(found)


def _age(lock: Path) -> float:
    try:
        return time.time() - lock.lstat().st_mtime
    except FileNotFoundError:
        return float("inf")  # gone meanwhile: nothing to wait for


def clear_stale_locks(
    repo: Path, name: str, report: Report, target: str, settle: float = SETTLE_SECONDS
) -> None:
    """Remove the locks a killed collection left on the writer's review refs; the caller
    holds the writer's lease. A lock younger than `settle` is given that long first, and
    one still younger then (taken meanwhile) is left for the transaction to meet."""
    remotes = _remotes_dir(repo)
    locks = review_ref_locks(remotes, name)
    if not locks:
        return
    wait = settle - min(_age(lock) for lock in locks)
    if wait > 0:
        time.sleep(min(wait, settle))
    removed = []
    for lock in review_ref_locks(remotes, name):  # bounded as above
        if _age(lock) >= settle and lock.is_file():
            lock.unlink(missing_ok=True)
            removed.append(f"refs/remotes/{lock.relative_to(remotes).as_posix()}")
    if removed:
        report.add(
            "review_ref_locks_removed",
            "warning",
            target,
            f"removed {len(removed)} lock file(s) a killed collection left on this writer's "
            f"review refs: {', '.join(removed)[:600]}",
        )
