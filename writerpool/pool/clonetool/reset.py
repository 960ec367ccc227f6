"""`reset`: the clone (mounted read-write) back on a base fetched from a bundle."""

from __future__ import annotations

import os
import shutil
import stat
from typing import Any

from .gitrun import BASE_BUNDLE, GIT_DIR, WORK, ToolError, git, git_env

IN_PROGRESS = (
    "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "AUTO_MERGE", "CHERRY_PICK_HEAD",
    "REVERT_HEAD", "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES",
    "BISECT_EXPECTED_REV", "BISECT_ANCESTORS_OK", "ORIG_HEAD", "FETCH_HEAD", "rebase-merge",
    "rebase-apply", "sequencer", "logs", "index", "index.lock", "HEAD.lock",
    "packed-refs.lock", "objects/info/alternates", "objects/info/http-alternates",
    "info/attributes", "info/grafts", "info/sparse-checkout", "shallow",
)  # fmt: skip


def _remove(rel: str) -> None:
    path = os.path.join(GIT_DIR, rel)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


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


def reset(request: dict[str, Any]) -> dict[str, Any]:
    branch, commit, source = request["branch"], request["commit"], request["bundle_ref"]
    make_removable(WORK)
    for rel in IN_PROGRESS:
        _remove(rel)
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
    git([*fetch, BASE_BUNDLE, *refspecs], env)
    got = git(["rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"], env).decode().strip()
    if got != commit:
        raise ToolError("the base bundle holds another commit")
    # Later walks (collection) then stop at the base instead of crossing all history.
    git(["commit-graph", "write", "--reachable"], env)
    git(["reset", "-q", "--hard", f"refs/heads/{branch}"], env)
    git(["clean", "-ffdxq"], env)
    for rel in ("logs", "ORIG_HEAD", "COMMIT_EDITMSG"):
        _remove(rel)
    status = git(["status", "--porcelain", "--ignored", "-z"], env)
    return {"head": f"refs/heads/{branch}", "commit": got, "clean": not status}
