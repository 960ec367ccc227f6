"""`inspect`: what the clone holds, the WIP tree, and (asked to) the bundle."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from .gitrun import (
    CLONE_OBJECTS,
    GIT_DIR,
    OUT,
    ToolError,
    existing_commits,
    git,
    git_env,
    object_format,
    read_env,
    scratch_env,
)
from .refs import branches, read_head, read_refs

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
IDENTITY = {
    "GIT_AUTHOR_NAME": "writerpool",
    "GIT_AUTHOR_EMAIL": "writerpool@localhost",
    "GIT_COMMITTER_NAME": "writerpool",
    "GIT_COMMITTER_EMAIL": "writerpool@localhost",
}


def _clear_index_flags(env: dict[str, str]) -> None:
    # assume-unchanged and skip-worktree entries would hide changes from `git add -A`.
    listing = git(["ls-files", "-v", "-z"], env).split(b"\0")
    hidden = [e[2:] for e in listing if e[:1].islower()]
    skipped = [e[2:] for e in listing if e[:1] == b"S"]
    for flag, paths in (("--no-assume-unchanged", hidden), ("--no-skip-worktree", skipped)):
        if paths:
            git(["update-index", flag, "-z", "--stdin"], env, b"\0".join(paths) + b"\0")


def _stage_everything(
    scratch: str, head_commit: str | None, copy_index: bool, warnings: list[bytes]
) -> str:
    env = scratch_env(scratch, GIT_INDEX_FILE=os.path.join(scratch, "index"))
    index = os.path.join(scratch, "index")
    if os.path.lexists(index):
        os.unlink(index)
    source = os.path.join(GIT_DIR, "index")
    if copy_index and os.path.isfile(source) and not os.path.islink(source):
        shutil.copyfile(source, index)  # keeps stat data, so unchanged files are not rehashed
        git(["update-index", "-q", "--no-untracked-cache", "--no-fsmonitor"], env)
        _clear_index_flags(env)
    else:
        git(["read-tree", head_commit or "--empty"], env)
    git(["add", "-A", "--", "."], env, warnings=warnings)
    # Files ignored only by .git/info/exclude are the agent's work too: add them by force.
    others = ["ls-files", "-z", "--others", "--exclude-per-directory=.gitignore"]
    extra = git(others, env, warnings=warnings)
    if extra.strip(b"\0"):
        literal = dict(env, GIT_LITERAL_PATHSPECS="1")
        git(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"], literal, extra)
    return git(["write-tree"], env).decode().strip()


def capture_wip(scratch: str, head_commit: str | None) -> tuple[str, bool]:
    """The tree of the working tree as `git add -A` sees it (objects go to scratch), and
    whether git skipped a directory it could not read (its files are then missing)."""
    warnings: list[bytes] = []
    try:
        tree = _stage_everything(scratch, head_commit, True, warnings)
    except ToolError:
        # A damaged or unusual index: start from HEAD's tree and hash every file.
        warnings.clear()
        tree = _stage_everything(scratch, head_commit, False, warnings)
    return tree, any(b"could not open directory" in w for w in warnings)


def wip_commit(scratch: str, tree: str, parent: str | None, label: str) -> str:
    env = scratch_env(scratch)
    when = "@0 +0000"
    if parent is not None:
        when = "@" + git(["show", "-s", "--format=%ct", parent], env).decode().strip() + " +0000"
    # Fixed identity and date: the same work always gives the same commit id.
    env.update(IDENTITY, GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    message = (
        f"WIP on {label}: uncommitted and untracked work\n\n"
        "Captured by writerpool collect; not a commit the agent made.\n"
    )
    args = ["commit-tree", "--no-gpg-sign", tree, "-m", message]
    if parent is not None:
        args += ["-p", parent]
    return git(args, env).decode().strip()


def is_new(commit: str, exclude: list[str], env: dict[str, str]) -> bool:
    """Whether `commit` has history that the excluded commits do not reach."""
    out = git(["rev-list", "-n1", commit, "--not", *exclude, "--"], env)
    return bool(out.strip())


def write_bundle(scratch: str, exports: list[dict[str, Any]], exclude: list[str]) -> str | None:
    """Bundle the exports that carry new history; None when none does."""
    wanted = [e for e in exports if e["in_bundle"]]
    if not wanted:
        return None
    export = os.path.join(scratch, "export.git")
    plain = {k: v for k, v in git_env().items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
    fmt = object_format()
    git(["init", "-q", "--bare", "--template=", f"--object-format={fmt}", export], plain)
    with open(os.path.join(export, "objects", "info", "alternates"), "w") as handle:
        handle.write(os.path.join(scratch, "objects") + "\n" + CLONE_OBJECTS + "\n")
    env = dict(plain, GIT_DIR=export)
    updates = "".join(f"create {e['ref']} {e['commit']}\n" for e in wanted)
    git(["update-ref", "--stdin"], env, updates.encode())
    part = os.path.join(OUT, "collect.bundle.part")
    git(["bundle", "create", "-q", part, *[e["ref"] for e in wanted], "--not", *exclude], env)
    os.rename(part, os.path.join(OUT, "collect.bundle"))
    return "collect.bundle"


def _exports(
    found: list[dict[str, Any]],
    baseline: dict[str, str],
    head: str,
    head_commit: str | None,
    env: dict[str, str],
) -> list[dict[str, Any]]:
    exports = []
    for entry in found:
        if entry["commit"] is not None and baseline.get(entry["name"]) != entry["commit"]:
            exports.append({"name": entry["name"], "commit": entry["commit"], "kind": "branch"})
    if head == "detached" and head_commit is not None:
        tips = [e["commit"] for e in found if e["commit"] is not None]
        if is_new(head_commit, existing_commits(tips + list(baseline.values()), env), env):
            exports.append({"name": "detached-head", "commit": head_commit, "kind": "detached"})
    return exports


def inspect(request: dict[str, Any]) -> dict[str, Any]:
    scratch = tempfile.mkdtemp(prefix="inspect-", dir="/tmp")
    env = read_env(scratch)
    refs, odd = read_refs()
    head, head_commit = read_head(refs)
    found = branches(refs, odd, env)
    baseline: dict[str, str] = request.get("baseline", {})
    tree, unreadable = capture_wip(scratch, head_commit)
    head_tree = EMPTY_TREE
    if head_commit is not None:
        head_tree = git(["rev-parse", f"{head_commit}^{{tree}}"], env).decode().strip()
    wip = tree if tree != head_tree else None
    exports = _exports(found, baseline, head, head_commit, env)
    if wip is not None:
        label = "detached-head" if head == "detached" else head.removeprefix("refs/heads/")
        exports.append({"name": f"{label}-wip", "commit": None, "kind": "wip"})
    result: dict[str, Any] = {
        "head": head, "head_commit": head_commit, "branches": found,
        "stash": b"refs/stash" in refs or b"refs/stash" in odd,
        "tags": sum(1 for k in refs if k.startswith(b"refs/tags/")),
        "dirty": wip is not None, "wip_tree": wip, "exports": exports, "bundle": None,
        "unreadable": unreadable,
    }  # fmt: skip
    if request.get("bundle"):
        result.update(_collect(request, result, scratch))
    return result


def _collect(request: dict[str, Any], result: dict[str, Any], scratch: str) -> dict[str, Any]:
    exports: list[dict[str, Any]] = result["exports"]
    for entry in exports:
        if entry["kind"] == "wip":
            label = entry["name"].removesuffix("-wip")
            entry["commit"] = wip_commit(scratch, result["wip_tree"], result["head_commit"], label)
    wip_env = scratch_env(scratch)
    exclude = existing_commits(list(request.get("exclude", [])), wip_env)
    for number, entry in enumerate(exports):
        entry["ref"] = f"refs/heads/wp-{number}"
        entry["in_bundle"] = is_new(entry["commit"], exclude, wip_env)
    return {"bundle": write_bundle(scratch, exports, exclude), "excluded": exclude}
