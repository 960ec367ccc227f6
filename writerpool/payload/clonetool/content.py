"""The clone judged by what it holds: the work tree hashed against HEAD's tree, and
everything git would not carry named with a kind.

The clone's index is never used to decide what changed (an agent can forge its stat
data and blob ids): a scratch index is read from HEAD's tree with no stat data, so
`git add -A` hashes every file. Files the caps exclude, unreadable files and nested
repositories are kept out of that index by literal exclude pathspecs, so they are
never read. What the walk saw and the scratch index lacks is classified:

work that is not exported (the collection is then incomplete):
  nested_repo, dot_git, unreadable, too_large, over_total, refused_name
leftovers that are not work (not exported; they keep the writer from a session):
  ignored, special, directory
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from .gitdir import TOP, description_changed, object_extras, shown
from .gitrun import GIT_DIR, git, scratch_env
from .tree import Disk, parents, under, walk

WORK_KINDS = ("nested_repo", "dot_git", "unreadable", "too_large", "over_total", "refused_name")
LEFTOVER_KINDS = ("ignored", "special", "directory")
SHOWN = 50  # entries of each kind named in the report; all are counted and digested
DEFAULT_MAX_FILE = 100 * 1024 * 1024
DEFAULT_MAX_TOTAL = 1024 * 1024 * 1024
# An empty branches/ is tolerated (older git templates made one); description is judged
# by its text (gitdir.description_changed).
GIT_ALLOWED = TOP | {"description", "branches"}


@dataclass
class BaseEntry:
    mode: bytes
    oid: bytes
    size: int


@dataclass
class Found:
    entries: list[tuple[str, bytes, int]] = field(default_factory=list)  # kind, path, size

    def add(self, kind: str, path: bytes, size: int = 0) -> None:
        self.entries.append((kind, path, size))

    def report(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        shown: list[dict[str, Any]] = []
        digest = hashlib.sha256()
        for kind, path, size in sorted(self.entries):
            counts[kind] = counts.get(kind, 0) + 1
            if counts[kind] <= SHOWN:
                name = path.decode("utf-8", "surrogateescape")
                shown.append({"kind": kind, "path": name, "size": size})
            if kind in WORK_KINDS:
                digest.update(b"%s\0%s\0%d\0" % (kind.encode(), path, size))
        return {"entries": shown, "counts": counts, "unexported_digest": digest.hexdigest()}


def base_listing(commit: str | None, env: dict[str, str]) -> dict[bytes, BaseEntry]:
    if commit is None:
        return {}
    fmt = "--format=%(objectmode) %(objectname) %(objectsize)%x09%(path)"
    out = git(["ls-tree", "-r", "-z", fmt, commit], env)
    listing: dict[bytes, BaseEntry] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, oid, size = meta.split(b" ")
        listing[path] = BaseEntry(mode, oid, int(size) if size.isdigit() else -1)
    return listing


def ignored(paths: list[bytes], env: dict[str, str]) -> set[bytes]:
    """Which of these untracked paths the work tree's .gitignore files ignore."""
    if not paths:
        return set()
    data = b"\0".join(paths) + b"\0"
    # Exit 1: none is ignored. (check-ignore takes paths, not pathspecs.)
    out = git(["check-ignore", "-z", "--stdin", "--no-index"], env, data, allow=(0, 1))
    return {p for p in out.split(b"\0") if p}


def index_paths(env: dict[str, str]) -> set[bytes]:
    """Paths the clone's own index lists. Trusted only to add work (an ignored file
    staged with `git add -f` is work), never to hide any."""
    index = os.path.join(GIT_DIR, "index")
    if not os.path.isfile(index) or os.path.islink(index):
        return set()
    try:
        out = git(["ls-files", "-z"], dict(env, GIT_INDEX_FILE=index))
    except Exception:
        return set()
    return {p for p in out.split(b"\0") if p}


def _plan(
    disk: Disk, base: dict[bytes, BaseEntry], skip: set[bytes], caps: dict[str, int], found: Found
) -> list[bytes]:
    """Paths kept out of the scratch index (unread), each reported with its kind."""
    max_file = int(caps.get("max_file", DEFAULT_MAX_FILE))
    max_total = int(caps.get("max_total", DEFAULT_MAX_TOTAL))
    excluded = [p for p in (*disk.nested, *disk.unreadable) if p]
    total = 0
    for path in sorted(disk.files):
        size = disk.files[path]
        if path in skip or path in disk.unreadable:
            continue
        known = base.get(path)
        if known is not None and known.size == size:
            continue  # no larger than what the base already holds: hashed, never capped
        if size > max_file:
            found.add("too_large", path, size)
            excluded.append(path)
        elif total + size > max_total:
            found.add("over_total", path, size)
            excluded.append(path)
        else:
            total += size
    for path in disk.nested:
        found.add("nested_repo", path)
    for path in disk.unreadable:
        found.add("unreadable", path, disk.files.get(path, 0))
    for path in disk.dot_git:
        found.add("dot_git", path)
    return excluded


def stage(
    scratch: str, head_commit: str | None, excluded: list[bytes], forced: set[bytes]
) -> tuple[str, set[bytes]]:
    """The work tree's tree (objects go to scratch) and the paths it holds; `forced`
    are ignored files that are added all the same."""
    index = os.path.join(scratch, "index")
    env = scratch_env(scratch, GIT_INDEX_FILE=index)
    if os.path.lexists(index):
        os.unlink(index)
    # No stat data in this index, so every file is hashed: the clone's index is not read.
    git(["read-tree", head_commit or "--empty"], env)
    # Hash first without writing anything (refresh records the stat data of each file
    # whose content matches), so `add` only stores what really changed. Exit 1: some
    # files differ, which is what add is for.
    git(["update-index", "-q", "--refresh", "--ignore-missing", "--unmerged"], env,
        allow=(0, 1))  # fmt: skip
    specs = [b"."] + [b":(exclude,literal)" + p for p in excluded]
    git(["add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul"], env,
        b"\0".join(specs) + b"\0")  # fmt: skip
    if forced:
        names = b"".join(b":(literal)" + p + b"\0" for p in sorted(forced))
        git(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"], env, names)
    tree = git(["write-tree"], env).decode().strip()
    listed = git(["ls-files", "-z"], env)
    return tree, {p for p in listed.split(b"\0") if p}


def _leftovers(
    disk: Disk, base: dict[bytes, BaseEntry], held: set[bytes], excluded: set[bytes],
    skipped: set[bytes], found: Found,
) -> None:  # fmt: skip
    for path in disk.files:
        if path not in held and path not in excluded:
            found.add("ignored" if path in skipped else "refused_name", path, disk.files[path])
    for path in disk.special:
        found.add("special", path)
    # Directories holding nothing at all: whatever else they hold is reported already.
    seen = [*held, *base, *disk.files, *disk.special, *disk.unreadable, *disk.dot_git]
    known = parents(seen) | set(base) | set(disk.nested) | set(disk.unreadable)
    extra = {d for d in disk.dirs if d not in known and not under(d, disk.nested)}
    for path in extra:
        if os.path.dirname(path) not in extra:
            found.add("directory", path)


def index_matches(base: dict[bytes, BaseEntry], env: dict[str, str]) -> bool:
    """Whether the clone's own index lists exactly HEAD's tree (stage 0, same blobs)."""
    index = os.path.join(GIT_DIR, "index")
    if not os.path.isfile(index) or os.path.islink(index):
        return False
    try:
        out = git(["ls-files", "-s", "-z"], dict(env, GIT_INDEX_FILE=index))
    except Exception:
        return False
    seen = 0
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, oid, stage_no = meta.split(b" ")
        known = base.get(path)
        if stage_no != b"0" or known is None or (known.mode, known.oid) != (mode, oid):
            return False
        seen += 1
    return seen == len(base)


def git_state() -> list[str]:
    """Entries of the clone's git directory that a fresh clone does not have (gitdir.py)."""
    extra = [n for n in sorted(os.listdir(GIT_DIR)) if n not in GIT_ALLOWED]
    if description_changed():
        extra.append("description")
    for sub, allowed in (("info", {"exclude"}), ("hooks", set()), ("branches", set())):
        path = os.path.join(GIT_DIR, sub)
        if os.path.isdir(path) and not os.path.islink(path):
            extra += [f"{sub}/{n}" for n in sorted(os.listdir(path)) if n not in allowed]
    extra += object_extras()
    exclude = os.path.join(GIT_DIR, "info", "exclude")
    if os.path.isfile(exclude) and not os.path.islink(exclude):
        with open(exclude, "rb") as handle:
            lines = handle.read(1 << 20).splitlines()
        if any(line.strip() and not line.startswith(b"#") for line in lines):
            extra.append("info/exclude")
    return [shown(e) for e in extra[:SHOWN]]


@dataclass
class Content:
    tree: str
    found: Found
    index_ok: bool


def judge(
    scratch: str, head_commit: str | None, caps: dict[str, int], env: dict[str, str]
) -> Content:
    found = Found()
    disk = walk()
    base = base_listing(head_commit, env)
    untracked = [p for p in disk.files if p not in base and p not in disk.unreadable]
    ignored_now = ignored(untracked, env)
    # An ignored file the clone's index holds was added on purpose: work, not a leftover.
    staged = ignored_now & index_paths(env)
    skipped = ignored_now - staged
    excluded = _plan(disk, base, skipped, caps, found)
    tree, held = stage(scratch, head_commit, excluded, staged - set(excluded))
    _leftovers(disk, base, held, set(excluded), skipped, found)
    return Content(tree=tree, found=found, index_ok=index_matches(base, env))
