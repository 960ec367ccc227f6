"""`writer refs NAME [--prune] [--apply]`: a writer's review refs in the checkout.

Lists the refs collections imported (`writer-<name>/…`), the ones moved aside by a later
collection (`writer-<name>@<time>/…`) and which of them the workspace's base already
contains. `--prune` drops the moved-aside and the merged ones (a plan until --apply);
the current, unmerged review refs are never dropped here.
"""

from __future__ import annotations

from pathlib import Path

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import default_base_name, resolve_base
from writerpool.gitops.hostgit import CommandFailed, git, git_reason
from writerpool.pool.provision.listing import unknown_writer, writer_names
from writerpool.report import Report


def _refs(repo: Path, *extra: str) -> dict[str, str]:
    """ref -> commit under refs/remotes/ (bounded by the checkout's remote refs)."""
    try:
        done = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", *extra,
                   "refs/remotes/", timeout=120)  # fmt: skip
    except CommandFailed as exc:
        raise WriterpoolError("writer_collect_failed", "checkout refs are unreadable") from exc
    refs = {}
    for line in done.out.splitlines():
        ref, _, commit = line.partition(" ")
        if commit:
            refs[ref] = commit
    return refs


def _alias_of(paths: Paths, loaded: LoadedConfig, name: str) -> str:
    for alias, each in writer_names(paths):
        if each == name:
            return alias
    alias = name.rsplit("-w", 1)[0]
    if "-w" in name and alias in loaded.config.workspaces:
        return alias  # a removed writer: its refs stay in the checkout
    raise unknown_writer(paths, name)


def _base_commit(paths: Paths, repo: Path, alias: str) -> str:
    entry = load_modes(paths).workspaces.get(alias)
    name = entry.container.base if entry and entry.container else None
    return resolve_base(repo, name or default_base_name(repo)).commit


def ref_rows(mine: dict[str, str], merged: set[str], aside: str) -> list[dict[str, str | bool]]:
    """The review refs as rows, with whether each was moved aside and is merged."""
    return [
        {"ref": r.removeprefix("refs/remotes/"), "commit": c, "movedAside": r.startswith(aside),
         "merged": r in merged}
        for r, c in sorted(mine.items())
    ]  # fmt: skip


def rows_text(rows: list[dict[str, str | bool]]) -> str:
    shown = ", ".join(
        f"{row['ref']}" + (" (moved aside)" if row["movedAside"] else "")
        + (" (merged)" if row["merged"] else "") for row in rows
    )  # fmt: skip
    return shown[:900] or "none"


def writer_refs(paths: Paths, loaded: LoadedConfig, name: str, prune: bool, apply: bool) -> Report:
    report = Report("writer refs")
    alias = _alias_of(paths, loaded, name)
    target = f"writer/{alias}/{name}"
    repo = loaded.config.workspaces[alias]
    current, aside = f"refs/remotes/writer-{name}/", f"refs/remotes/writer-{name}@"
    base = _base_commit(paths, repo, alias)

    def read() -> tuple[dict[str, str], set[str]]:
        mine = {r: c for r, c in _refs(repo).items() if r.startswith((current, aside))}
        return mine, set(_refs(repo, f"--merged={base}")) & set(mine)

    mine, merged = read()
    drop = {r: c for r, c in mine.items() if r.startswith(aside) or r in merged}
    if prune and apply:
        # What is left is read again from the checkout, after the deletion.
        _delete(repo, drop)
        dropped = ref_rows(drop, merged & set(drop), aside)
        deleted = f"deleted {len(drop)} moved-aside or merged ref(s): {rows_text(dropped)}"
        report.add("review_refs_pruned", "ok", target, deleted)
        mine, merged = read()
        rows = ref_rows(mine, merged, aside)
        report.add("review_refs_listed", "ok", target,
                   f"{len(rows)} review ref(s) left: {rows_text(rows)}")  # fmt: skip
        report.data.update(refs=rows, dropped=dropped)
        return report
    rows = ref_rows(mine, merged, aside)
    report.add("review_refs_listed", "ok", target, f"{len(rows)} review ref(s): {rows_text(rows)}")
    report.data["refs"] = rows
    if prune:
        planned = ref_rows(drop, merged & set(drop), aside)
        report.add("review_refs_pruned", "planned", target,
                   f"would delete {len(drop)} moved-aside or merged ref(s): {rows_text(planned)}; "
                   f"{len(rows) - len(drop)} would be left")  # fmt: skip
        report.data["dropped"] = planned
    return report


def _delete(repo: Path, drop: dict[str, str]) -> None:
    """Delete the refs in one transaction, each only if it still names its commit."""
    if not drop:
        return
    lines = "".join(f"delete {ref} {commit}\n" for ref, commit in sorted(drop.items()))
    try:
        git(repo, "update-ref", "--stdin", input=lines.encode(), timeout=300)
    except CommandFailed as exc:
        message = f"deleting review refs failed: {git_reason(exc)}"
        raise WriterpoolError("writer_collect_failed", message) from exc
