"""Review refs: a collection never deletes another branch's review ref.

Each collection records the refs it wrote under `refs/remotes/writer-<name>/`. A new
collection of the same writer leaves the earlier refs of other branches where they are
(listed in its report), and moves an earlier ref it would overwrite with another commit,
or that nests with a new name (`x` and `x/y` cannot both exist), aside to
`refs/remotes/writer-<name>@<time>/<branch>`: nothing the operator has not read is lost.
`writer refs NAME --prune --apply` drops moved-aside refs and refs already merged into
the workspace's base; `--keep-old` leaves every earlier ref in place (a new name that
nests with one is then refused).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.gitops.hostgit import CommandFailed, git, git_reason
from writerpool.report import Report


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


def _nests(a: str, b: str) -> bool:
    return a.startswith(b + "/") or b.startswith(a + "/")


def replaced_by(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    """Earlier refs the new collection overwrites with another commit or nests with
    (ref -> its earlier commit): these move aside. Bounded by old times new review refs."""
    return {
        ref: commit
        for ref, commit in old.items()
        if (ref in new and new[ref] != commit) or any(_nests(ref, n) for n in new)
    }


def staying(old: dict[str, str], new: dict[str, str], replaced: dict[str, str]) -> list[str]:
    """Earlier refs the new collection leaves where they are."""
    return sorted(ref for ref in old if ref not in new and ref not in replaced)


def aside_names(repo: Path, name: str, replaced: dict[str, str]) -> dict[str, str]:
    """Where each replaced ref moves: under writer-<name>@<time>/, a namespace no
    earlier collection used (ref -> new ref)."""
    prefix = f"refs/remotes/writer-{name}/"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside, n = f"refs/remotes/writer-{name}@{stamp}/", 1
    while replaced and collected_refs(repo, aside):  # bounded: one new stamp per second
        n += 1
        aside = f"refs/remotes/writer-{name}@{stamp}-{n}/"
    return {ref: aside + ref.removeprefix(prefix) for ref in sorted(replaced)}


def move_aside(repo: Path, replaced: dict[str, str], moves: dict[str, str]) -> None:
    """Move each replaced ref to its aside name in one transaction that fails when any
    of them moved meanwhile (nothing is deleted without its copy)."""
    if not moves:
        return
    lines = "".join(
        f"create {moves[ref]} {commit}\ndelete {ref} {commit}\n"
        for ref, commit in sorted(replaced.items())
    )
    try:
        git(repo, "update-ref", "--stdin", input=lines.encode(), timeout=300)
    except CommandFailed as exc:
        message = f"moving earlier review refs aside failed: {git_reason(exc)}"
        raise WriterpoolError("writer_collect_failed", message) from exc


def _short(ref: str) -> str:
    return ref.removeprefix("refs/remotes/")


def report_replaced(
    report: Report,
    target: str,
    name: str,
    moves: dict[str, tuple[str, str]],
    kept: list[str],
    planned: bool,
) -> None:
    """What happened to the writer's earlier review refs: moved aside (a warning with
    the command that drops them) and left in place (listed). `moves`: ref -> (commit,
    aside ref)."""
    if moves:
        shown = ", ".join(f"{_short(ref)} ({commit[:12]}) -> {_short(aside)}"
                          for ref, (commit, aside) in sorted(moves.items()))  # fmt: skip
        verb = "would move" if planned else "moved"
        report.add(
            "review_refs_replaced",
            "planned" if planned else "warning",
            target,
            f"{verb} {len(moves)} earlier review ref(s) the new collection overwrites "
            f"aside: {shown[:600]}",
            remedy=f"review them (git log {_short(next(iter(sorted(moves.values())))[1])}), "
            f"then writerpool writer refs {name} --prune --apply drops the moved ones",
            replaced=[{"ref": ref, "commit": commit, "movedTo": aside}
                      for ref, (commit, aside) in sorted(moves.items())],
        )  # fmt: skip
    if kept:
        shown = ", ".join(_short(ref) for ref in kept)
        report.add(
            "review_refs_kept",
            "ok",
            target,
            f"{len(kept)} earlier review ref(s) stay: {shown[:600]}",
            kept=kept,
        )
