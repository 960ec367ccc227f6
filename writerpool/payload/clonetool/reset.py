"""`reset`: the clone (mounted read-write) back on a base fetched from a bundle that the
controller streams on stdin, the request in the environment (as `provision` takes it)."""

from __future__ import annotations

import os
import stat
from typing import IO, Any

from .gitdir import SHOWN, description_changed, object_extras, shown
from .gitrun import GIT_DIR, WORK, ToolError, git, git_env
from .provision import REQUEST_VAR, header_ok, read_request, receive
from .removal import empty_dir, remove_at, remove_path
from .storage import clear
from .tree import parents

# What a fresh clone's git directory holds (gitdir.TOP, less what reset rebuilds);
# everything else (in-progress operations, reflogs, rr-cache, worktrees, modules,
# split-index files, a description, anything planted) goes.
KEEP = {"HEAD", "config", "objects", "refs", "packed-refs", "hooks"}
# Rebuilt by every reset: not worth naming.
ROUTINE = {"index", "info", "logs", "ORIG_HEAD", "COMMIT_EDITMSG", "FETCH_HEAD", "reset.bundle"}
BUNDLE = os.path.join(GIT_DIR, "reset.bundle")


def _remove(rel: str) -> None:
    remove_path(os.path.join(GIT_DIR, rel))


def _write(rel: str, text: str) -> None:
    # Replace rather than write through: the old entry may be a link to anywhere.
    _remove(rel)
    with open(os.path.join(GIT_DIR, rel), "x") as handle:
        handle.write(text)


def make_removable(top: str) -> None:
    """Give the owner write access to every directory, so that clean can delete below it."""
    for dirpath, dirnames, _files in os.walk(top):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o700 != 0o700:
                os.chmod(path, st.st_mode | 0o700)


def clear_git_dir() -> list[str]:
    """Remove what a fresh clone's git directory lacks (gitdir.py); the names removed,
    routine git files left out. Runs before git does, so git never reads them."""
    removed = []
    if description_changed():
        removed.append("description")
    for name in sorted(os.listdir(GIT_DIR)):
        if name not in KEEP:
            _remove(name)
            if name not in ROUTINE and name != "description":
                removed.append(name)
    for rel in object_extras():  # alternates among them
        _remove(rel)
        removed.append(rel)
    return removed


def reset(stream: IO[bytes]) -> dict[str, Any]:
    request = read_request(os.environ.get(REQUEST_VAR))
    branch, commit, source = request["branch"], request["commit"], request["bundle_ref"]
    clear()  # the cache, when the baseline has it empty
    make_removable(WORK)
    removed = clear_git_dir()
    if os.path.isdir(os.path.join(GIT_DIR, "hooks")):
        empty_dir(os.path.join(GIT_DIR, "hooks"))
    # Every ref goes (branches, tags, stash, notes, anything planted), then the base returns.
    _remove("packed-refs")
    _remove("refs")
    for sub in ("refs/heads", "refs/tags"):
        os.makedirs(os.path.join(GIT_DIR, sub))
    _write("HEAD", f"ref: refs/heads/{branch}\n")
    if os.path.islink(os.path.join(GIT_DIR, "info")):
        _remove("info")
    os.makedirs(os.path.join(GIT_DIR, "info"), exist_ok=True)
    _write("info/exclude", "")
    env = git_env()
    refspecs = [f"+{source}:refs/heads/{branch}"]
    if request.get("tags"):
        refspecs.append("+refs/tags/*:refs/tags/*")
    fetch = ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--update-head-ok",
             "--no-auto-maintenance", "--no-recurse-submodules"]  # fmt: skip
    receive(stream, BUNDLE, int(request["max_bytes"]))
    if not header_ok(BUNDLE):
        raise ToolError("a base bundle has no prerequisites")
    git([*fetch, BUNDLE, *refspecs], env)
    _remove("reset.bundle")
    got = git(["rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"], env).decode().strip()
    if got != commit:
        raise ToolError("the base bundle holds another commit")
    # Later walks (collection) then stop at the base instead of crossing all history.
    git(["commit-graph", "write", "--reachable"], env)
    git(["reset", "-q", "--hard", f"refs/heads/{branch}"], env)
    remove_untracked(git(["ls-tree", "-r", "-z", "--name-only", "HEAD"], env))
    for rel in ("logs", "ORIG_HEAD", "COMMIT_EDITMSG"):
        _remove(rel)
    # Objects only the agent's work reached go too: the next session must not find them.
    git(["prune", "--expire=now"], env)
    return {
        "head": f"refs/heads/{branch}",
        "commit": got,
        "removed": [shown(n) for n in removed[:SHOWN]],
        "removed_count": len(removed),
    }


def remove_untracked(listing: bytes) -> None:
    """Remove every entry of the work tree that HEAD's tree does not hold: ignored
    files, special files, empty directories, nested repositories, `.git` directories
    below the top. Unlike `git clean`, this sees what git does not."""
    tracked = {p for p in listing.split(b"\0") if p}
    dirs = parents(tracked)
    pending = [b""]
    while pending:
        rel = pending.pop()
        fd = os.open(os.path.join(WORK.encode(), rel), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in os.listdir(fd):
                raw = os.fsencode(name)
                path = os.path.join(rel, raw) if rel else raw
                if path == b".git" or path in tracked:
                    continue
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                if path in dirs and stat.S_ISDIR(mode) and b".git" not in path.split(b"/"):
                    pending.append(path)
                else:
                    remove_at(fd, name)
        finally:
            os.close(fd)
