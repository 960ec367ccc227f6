"""What a clone made by writerpool holds in `.git`, as an allowlist.

The guard (content.git_state) names every entry outside it, so a writer holding one is
not at its baseline; reset (reset.reset) removes them. Anything else an agent writes
under `.git` (a new directory below objects/, a description, a file beside the packs)
could carry one session's data to the next, so it is judged by what a fresh clone has,
not by what git would read.
"""

from __future__ import annotations

import os
import re
import stat

from .gitrun import GIT_DIR

# Top-level entries a fresh clone has (the guard reads info/ and hooks/ on their own).
TOP = frozenset({"HEAD", "config", "objects", "refs", "packed-refs", "index", "hooks", "info"})
# Git's templates write `description` with this text; writerpool's clones have none.
DEFAULT_DESCRIPTION = b"Unnamed repository; edit this file 'description' to name the repository.\n"
_FANOUT = re.compile(r"[0-9a-f]{2}")
_LOOSE = re.compile(r"[0-9a-f]{38}|[0-9a-f]{62}")
_PACK = re.compile(
    r"multi-pack-index|pack-([0-9a-f]{40}|[0-9a-f]{64})\.(pack|idx|rev|bitmap|mtimes|promisor|keep)"
)
_INFO = frozenset({"packs", "commit-graph"})
_GRAPHS = re.compile(r"commit-graph-chain|graph-([0-9a-f]{40}|[0-9a-f]{64})\.graph")
SHOWN = 50


def _kind(path: str) -> int:
    return os.lstat(path).st_mode


def _files_matching(rel: str, pattern: re.Pattern[str]) -> list[str]:
    """Entries of directory `rel` that are not regular files named by `pattern`."""
    top = os.path.join(GIT_DIR, rel)
    extra = []
    for name in sorted(os.listdir(top)):
        if not (pattern.fullmatch(name) and stat.S_ISREG(_kind(os.path.join(top, name)))):
            extra.append(f"{rel}/{name}")
    return extra


def _dir(rel: str) -> bool:
    return stat.S_ISDIR(_kind(os.path.join(GIT_DIR, rel)))


def object_extras() -> list[str]:
    """Entries of objects/ other than loose objects, packs and git's own index files.
    Bounded by what objects/ holds (every loose object name is looked at once)."""
    if not os.path.lexists(os.path.join(GIT_DIR, "objects")) or not _dir("objects"):
        return []  # a missing or odd objects/ is the top-level check's and git's to refuse
    extra = []
    for name in sorted(os.listdir(os.path.join(GIT_DIR, "objects"))):
        rel = f"objects/{name}"
        if (name not in ("pack", "info") and not _FANOUT.fullmatch(name)) or not _dir(rel):
            extra.append(rel)
        elif name == "pack":
            extra += _files_matching(rel, _PACK)
        elif name == "info":
            extra += _info_extras(rel)
        else:
            extra += _files_matching(rel, _LOOSE)
    return extra


def _info_extras(rel: str) -> list[str]:
    extra = []
    for name in sorted(os.listdir(os.path.join(GIT_DIR, rel))):
        path = f"{rel}/{name}"
        if name == "commit-graphs" and _dir(path):
            extra += _files_matching(path, _GRAPHS)
        elif name not in _INFO or not stat.S_ISREG(_kind(os.path.join(GIT_DIR, path))):
            extra.append(path)
    return extra


def description_changed() -> bool:
    """A description other than git's default text (a fresh clone has none at all)."""
    path = os.path.join(GIT_DIR, "description")
    if not os.path.lexists(path):
        return False
    if not stat.S_ISREG(_kind(path)):
        return True
    with open(path, "rb") as handle:
        return handle.read(len(DEFAULT_DESCRIPTION) + 1) != DEFAULT_DESCRIPTION


def shown(name: str) -> str:
    """A name an agent chose, safe to print: ASCII escapes, at most 200 characters."""
    return ascii(name)[1:-1][:200]
