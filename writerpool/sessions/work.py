"""Where a session's work is: the writer clone's head and the branches it changed,
read with dulwich (the host never runs git in a writer's clone)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from writerpool.errors import WriterpoolError

if TYPE_CHECKING:
    from writerpool.gitops.clone_read import CloneRefs

log = logging.getLogger(__name__)

UNCOMMITTED_NOTE = (
    " It also holds uncommitted or untracked changes, collected as <branch>-wip."
)
HOST_NOTE = "This session works in the operator's checkout itself; nothing is collected."
READ_ONLY_NOTE = "A read-only session changes no files."


def collect_note(writer: str) -> str:
    return (
        f"The work stays in writer {writer} and reaches the operator's checkout only when "
        f"the operator collects it (as refs/remotes/writer-{writer}/<branch>)."
    )


def read_clone(clone: Path) -> CloneRefs | None:
    """The clone's refs, or None when they cannot be read now (logged, not raised)."""
    from writerpool.gitops.clone_read import read_refs  # noqa: PLC0415 - dulwich on use

    try:
        return read_refs(clone)
    except WriterpoolError as exc:
        log.warning("writer clone refs unreadable: %s", exc.code)
        return None


def changed_branches(start: dict[str, str], now: dict[str, str]) -> list[dict[str, Any]]:
    """Branches created, moved or deleted since `start`, by name."""
    names = sorted(set(start) | set(now))
    return [{"name": n, "commit": now.get(n)} for n in names if start.get(n) != now.get(n)]


def clone_work(
    writer: str, start: CloneRefs | None, now: CloneRefs | None, uncommitted: bool | None = None
) -> dict[str, Any]:
    """Where a writer session's work is. `uncommitted` is judged at close (None while
    the session runs, or when it could not be told)."""
    if now is None:
        return {
            "headCommit": None,
            "headBranch": None,
            "branchesChanged": [],
            "uncommittedChanges": uncommitted,
            "note": collect_note(writer) + " Its refs cannot be read at the moment.",
        }
    head = now.head.removeprefix("refs/heads/") if now.head.startswith("refs/heads/") else None
    before = start.branches if start is not None else {}
    return {
        "headCommit": now.head_commit,
        "headBranch": head,
        "branchesChanged": changed_branches(before, now.branches),
        "uncommittedChanges": uncommitted,
        "note": collect_note(writer) + (UNCOMMITTED_NOTE if uncommitted else ""),
    }


def other_work(read_only: bool) -> dict[str, Any]:
    note = READ_ONLY_NOTE if read_only else HOST_NOTE
    return {"headCommit": None, "headBranch": None, "branchesChanged": [], "note": note}
