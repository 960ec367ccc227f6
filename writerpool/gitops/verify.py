"""Is a writer's clone safe to hand to an agent?

Judged over what a throwaway container on the writer's host saw of its `.git`
(`verify_snapshot`, gitops/git_snapshot.py; the probe names every path the check reads),
with dulwich's config parser for the settings. No git process runs here, and the
controller never reads the clone itself, so nothing the clone holds can execute.
"""

from __future__ import annotations

from typing import Any

from writerpool.gitops.git_snapshot import GitDirSnapshot, Kind, SnapshotGitDir, UnsafePathError
from writerpool.gitops.gitconfig_policy import config_problems

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


def probe() -> dict[str, Any]:
    """Every path the check reads, as a container on the writer's host is asked them."""
    kinds = {rel for rel, _ in _REQUIRED} | {rel for rel, _ in _FORBIDDEN_FILES}
    return {
        "kinds": sorted(kinds | {*_LEGACY_DIRS, "hooks", "config"}),
        "entries": [".", "hooks", *_LEGACY_DIRS],
        "reads": {"config": CONFIG_LIMIT},
    }


def verify_snapshot(snapshot: GitDirSnapshot) -> list[str]:
    """Problems that make the clone unsafe, over what a container on the writer's host
    saw of its `.git`; empty when it is safe. Each names a file or key, never a path or
    a value."""
    try:
        return _problems(SnapshotGitDir(snapshot))
    except UnsafePathError as exc:
        return [str(exc)]


def _problems(gitdir: SnapshotGitDir) -> list[str]:
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


def _layout_problems(gitdir: SnapshotGitDir) -> list[str]:
    problems: list[str] = []
    for rel, wanted in _REQUIRED:
        found = gitdir.kind(rel)
        if found is not wanted:
            problems.append(f"{rel} is a {found.value}, not a {wanted.value}")
    return problems


def _entry_problems(gitdir: SnapshotGitDir) -> list[str]:
    """Links and special files directly in `.git` (packed-refs, index, logs, info, ...)."""
    required = {rel for rel, _ in _REQUIRED}
    problems: list[str] = []
    for name, kind in gitdir.entries("."):
        if name in required or kind not in (Kind.SYMLINK, Kind.OTHER):
            continue
        shown = name if name in _KNOWN_ENTRIES else "an entry of .git"
        problems.append(f"{shown} is a {kind.value}")
    return problems


def _forbidden_problems(gitdir: SnapshotGitDir) -> list[str]:
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


def _non_empty(gitdir: SnapshotGitDir, rel: str) -> bool:
    found = gitdir.kind(rel)
    if found is Kind.MISSING:
        return False
    return found is not Kind.DIR or bool(gitdir.entries(rel))


def _hook_problems(gitdir: SnapshotGitDir) -> list[str]:
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


def _config_file_problems(gitdir: SnapshotGitDir) -> list[str]:
    if gitdir.kind("config") is not Kind.FILE:
        return []  # already reported by the layout check
    data = gitdir.read("config", limit=CONFIG_LIMIT)
    if data is None:
        return ["config is missing"]
    return config_problems(data)
