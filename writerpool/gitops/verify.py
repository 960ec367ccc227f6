"""Is a writer's clone safe to hand to an agent, and to read from the host?

Reads only: plain file reads through `safefs` and dulwich's config parser. No git
process runs here, so nothing the clone holds can execute. A clone on its host is judged
by the same code over what a container there saw (`verify_snapshot`, gitops/git_snapshot.py):
the probe names every path the check reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from writerpool.errors import WriterpoolError
from writerpool.gitops.git_snapshot import GitDirSnapshot, SnapshotGitDir
from writerpool.gitops.gitconfig_policy import config_problems
from writerpool.gitops.safefs import GitDir, Kind, UnsafePathError

CONFIG_LIMIT = 1024 * 1024

# Files whose mere presence makes git read objects, config, attributes or history
# from somewhere else, or marks a layout writerpool never creates.
_FORBIDDEN_FILES: tuple[tuple[str, str], ...] = (
    ("commondir", "commondir redirects the repository"),
    ("gitdir", "gitdir file present"),
    ("objects/info/alternates", "objects/info/alternates borrows objects from elsewhere"),
    ("objects/info/http-alternates", "objects/info/http-alternates borrows objects"),
    ("info/attributes", "info/attributes present"),
    ("info/grafts", "info/grafts rewrites history"),
    ("config.worktree", "config.worktree present"),
    ("shallow", "shallow clone (history incomplete)"),
    ("modules", "submodule repositories present"),
    ("worktrees", "linked worktrees present"),
    ("reftable", "reftable ref storage present"),
)
# Legacy remote definitions: harmless when empty, refused when they name anything.
_LEGACY_DIRS = ("remotes", "branches")
# Names git keeps directly in `.git`, safe to repeat in a message.
_KNOWN_ENTRIES = frozenset(
    {
        "packed-refs",
        "index",
        "logs",
        "info",
        "hooks",
        "description",
        "ORIG_HEAD",
        "FETCH_HEAD",
        "MERGE_HEAD",
        "COMMIT_EDITMSG",
        "shallow",
        "modules",
        "worktrees",
        "lfs",
        "branches",
        "remotes",
        "commondir",
        "gitdir",
        "config.worktree",
        "reftable",
        "sequencer",
    }
)
# Must be a real file or directory, never a link.
_REQUIRED: tuple[tuple[str, Kind], ...] = (
    ("HEAD", Kind.FILE),
    ("config", Kind.FILE),
    ("objects", Kind.DIR),
    ("refs", Kind.DIR),
)


class GitDirReader(Protocol):
    """What the check reads: safefs.GitDir, or a snapshot of one (git_snapshot.py)."""

    def kind(self, rel: str) -> Kind: ...

    def entries(self, rel: str) -> list[tuple[str, Kind]]: ...

    def read(self, rel: str, limit: int) -> bytes | None: ...


def probe() -> dict[str, Any]:
    """Every path the check reads, as a container on the writer's host is asked them."""
    kinds = {rel for rel, _ in _REQUIRED} | {rel for rel, _ in _FORBIDDEN_FILES}
    return {
        "kinds": sorted(kinds | {*_LEGACY_DIRS, "hooks", "config"}),
        "entries": [".", "hooks", *_LEGACY_DIRS],
        "reads": {"config": CONFIG_LIMIT},
    }


def verify_snapshot(snapshot: GitDirSnapshot) -> list[str]:
    """verify_clone over what a container on the writer's host saw of its `.git`."""
    try:
        return _problems(SnapshotGitDir(snapshot))
    except UnsafePathError as exc:
        return [str(exc)]


def verify_clone(clone: Path) -> list[str]:
    """Problems that make `clone` unsafe; an empty list when it is safe.

    Each problem is a short string naming the file or key, never a path or value.
    """
    try:
        with GitDir.open(clone) as gitdir:
            return _problems(gitdir)
    except UnsafePathError as exc:
        return [str(exc)]


def require_safe_clone(clone: Path) -> None:
    """Raise `clone_verification_failed` listing the problems, if any."""
    problems = verify_clone(clone)
    if problems:
        raise WriterpoolError(
            "clone_verification_failed", "the clone is unsafe: " + "; ".join(problems[:10])
        )


def _problems(gitdir: GitDirReader) -> list[str]:
    problems: list[str] = []
    # Each check runs even when another met a link it refused to follow.
    checks = (
        _layout_problems,
        _entry_problems,
        _forbidden_problems,
        _hook_problems,
        _config_file_problems,
    )
    for check in checks:
        try:
            problems += check(gitdir)
        except UnsafePathError as exc:
            problems.append(str(exc))
    return list(dict.fromkeys(problems))  # a refused link may be met by several checks


def _layout_problems(gitdir: GitDirReader) -> list[str]:
    problems: list[str] = []
    for rel, wanted in _REQUIRED:
        found = gitdir.kind(rel)
        if found is not wanted:
            problems.append(f"{rel} is a {found.value}, not a {wanted.value}")
    return problems


def _entry_problems(gitdir: GitDirReader) -> list[str]:
    """Links and special files directly in `.git` (packed-refs, index, logs, info, ...)."""
    required = {rel for rel, _ in _REQUIRED}
    problems: list[str] = []
    for name, kind in gitdir.entries("."):
        if name in required or kind not in (Kind.SYMLINK, Kind.OTHER):
            continue
        shown = name if name in _KNOWN_ENTRIES else "an entry of .git"
        problems.append(f"{shown} is a {kind.value}")
    return problems


def _forbidden_problems(gitdir: GitDirReader) -> list[str]:
    problems: list[str] = []
    for rel, message in _FORBIDDEN_FILES:
        try:
            if gitdir.kind(rel) is not Kind.MISSING:
                problems.append(message)
        except UnsafePathError as exc:
            problems.append(str(exc))
    for rel in _LEGACY_DIRS:
        if _non_empty(gitdir, rel):
            problems.append(f"{rel}/ defines legacy remotes")
    return problems


def _non_empty(gitdir: GitDirReader, rel: str) -> bool:
    found = gitdir.kind(rel)
    if found is Kind.MISSING:
        return False
    return found is not Kind.DIR or bool(gitdir.entries(rel))


def _hook_problems(gitdir: GitDirReader) -> list[str]:
    found = gitdir.kind("hooks")
    if found is Kind.MISSING:
        return []
    if found is not Kind.DIR:
        return [f"hooks is a {found.value}"]
    problems: list[str] = []
    for name, kind in gitdir.entries("hooks"):
        if kind is Kind.FILE and name.endswith(".sample"):
            continue
        # Hook names are a fixed list in git; anything else here is refused too, but
        # only a known hook name is repeated in the message.
        shown = name if name.isascii() and name.replace("-", "").isalpha() else "a file"
        problems.append(f"hook present: {shown[:40]}")
    return problems


def _config_file_problems(gitdir: GitDirReader) -> list[str]:
    if gitdir.kind("config") is not Kind.FILE:
        return []  # already reported by the layout check
    data = gitdir.read("config", limit=CONFIG_LIMIT)
    if data is None:
        return ["config is missing"]
    return config_problems(data)
