"""Review refs carry their collection: each collection records the refs it wrote under
`refs/remotes/writer-<name>/`, and a new collection of the same writer replaces that
writer's earlier ones (unless the operator keeps them with --keep-old).

A replaced ref's commits stay in the kept bundle of the collection that wrote it
(`collections/<stamp>.bundle`, listed in its manifest) and in the checkout's objects
until git prunes them; the finding names each replaced ref with its commit.
"""

from __future__ import annotations

from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.gitops.hostgit import CommandFailed, git
from writerpool.report import Report, Status


def collected_refs(repo: Path, prefix: str) -> dict[str, str]:
    """Full ref name -> commit of every ref under `prefix` in the operator's checkout."""
    try:
        done = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix, timeout=120)
    except CommandFailed as exc:
        raise WriterpoolError("writer_collect_failed", "checkout refs are unreadable") from exc
    refs = {}
    for line in done.out.splitlines():
        ref, _, commit = line.partition(" ")
        if ref.startswith(prefix) and commit:
            refs[ref] = commit
    return refs


def replaced_by(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    """Earlier refs the new collection removes or moves (ref -> its earlier commit)."""
    return {ref: commit for ref, commit in old.items() if new.get(ref) != commit}


def delete_stale(repo: Path, old: dict[str, str], new: dict[str, str]) -> None:
    """Delete the earlier refs the new collection does not write, in one transaction that
    fails when any of them moved meanwhile."""
    stale = {ref: commit for ref, commit in old.items() if ref not in new}
    if not stale:
        return
    lines = "".join(f"delete {ref} {commit}\n" for ref, commit in sorted(stale.items()))
    try:
        git(repo, "update-ref", "--stdin", input=lines.encode(), timeout=300)
    except CommandFailed as exc:
        message = "removing earlier review refs failed"
        raise WriterpoolError("writer_collect_failed", message) from exc


def report_replaced(
    report: Report, target: str, replaced: dict[str, str], status: Status, planned: bool
) -> None:
    if not replaced:
        return
    shown = ", ".join(f"{ref.removeprefix('refs/remotes/')} ({commit[:12]})"
                      for ref, commit in sorted(replaced.items()))  # fmt: skip
    verb = "would replace" if planned else "replaced"
    report.add(
        "review_refs_replaced",
        status,
        target,
        f"{verb} {len(replaced)} earlier review ref(s): {shown[:600]}; their commits stay in "
        "the earlier collection's kept bundle",
        remedy="pass --keep-old to keep earlier review refs beside the new ones",
        replaced=[{"ref": ref, "commit": commit} for ref, commit in sorted(replaced.items())],
    )
