"""`review`: the agent's commits and changes relative to the base, for the operator to read.

git runs over the clone's objects through a git directory of our own (gitrun.read_env),
so nothing the clone configures runs; no external diff and no textconv either. Branch
names are looked up among the clone's refs and git is given object ids only.
"""

from __future__ import annotations

import tempfile
from typing import Any

from .content import judge
from .gitrun import HEX, ToolError, existing_commits, git, read_env, scratch_env
from .refs import read_head, read_refs

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
SEP = "\x1f"
FORMAT = SEP.join(["%H", "%P", "%an", "%ae", "%aI", "%s"]) + "\x1e"
DIFF = ["diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames"]
# The answer is bounded whatever the clone holds: fields are cut, files beyond the cap
# are only counted (pool/collect/review.py's model holds the same limits).
MAX_FIELD = 4096
MAX_FILES = 2000


def _tip(refs: dict[bytes, bytes], branch: str | None, head_commit: str | None) -> str:
    if branch is None:
        if head_commit is None:
            raise ToolError("HEAD has no commit")
        return head_commit
    value = refs.get(b"refs/heads/" + branch.encode("utf-8", "surrogateescape"))
    if value is None or not HEX.fullmatch(value):
        raise ToolError("no readable branch of that name in the clone")
    return value.decode()


def _log(tip: str, exclude: list[str], limit: int, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git(["log", "--no-color", f"--max-count={limit}", f"--format={FORMAT}", tip,
               "--not", *exclude, "--"], env)  # fmt: skip
    commits = []
    for record in out.decode("utf-8", "replace").split("\x1e"):
        fields = record.strip("\n").split(SEP)
        if len(fields) != 6:
            continue
        commit, parents, author, email, date, subject = fields
        commits.append({"commit": commit, "parents": parents.split()[:64],
                        "author": author[:MAX_FIELD], "email": email[:MAX_FIELD],
                        "date": date[:64], "subject": subject[:MAX_FIELD]})  # fmt: skip
    return commits


def _numstat(old: str, new: str, env: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    """The first MAX_FILES changed files, and how many changed in all."""
    out = git([*DIFF, "--numstat", "-z", old, new, "--"], env)
    files: list[dict[str, Any]] = []
    total = 0
    for item in out.split(b"\0"):  # bounded: the diff's files; MAX_FILES of them kept
        parts = item.split(b"\t", 2)
        if len(parts) != 3:
            continue
        total += 1
        if len(files) >= MAX_FILES:
            continue
        added, removed, path = parts
        binary = added == b"-"
        files.append({"path": path.decode("utf-8", "surrogateescape")[:MAX_FIELD],
                      "binary": binary, "added": 0 if binary else int(added),
                      "removed": 0 if binary else int(removed)})  # fmt: skip
    return files, total


def review(request: dict[str, Any]) -> dict[str, Any]:
    scratch = tempfile.mkdtemp(prefix="review-", dir="/tmp")
    env = read_env(scratch)
    refs, _odd = read_refs(request["limits"])
    head, head_commit = read_head(refs)
    exclude = existing_commits(list(request.get("exclude", [])), env)
    base = request["base"]
    result: dict[str, Any] = {"head": head, "head_commit": head_commit, "commits": []}
    if request.get("wip"):
        content = judge(scratch, head_commit, request.get("caps", {}), env)
        env = scratch_env(scratch)
        old = head_commit or EMPTY_TREE
        new = content.tree
    else:
        new = _tip(refs, request.get("branch"), head_commit)
        limit = int(request.get("max_commits", 200))
        result["commits"] = _log(new, exclude, limit, env)
        merge = git(["merge-base", base, new], env, allow=(0, 1)).decode().strip()
        old = merge or EMPTY_TREE
    files, total = _numstat(old, new, env)
    result.update(tip=new, old=old, files=files, files_total=total)
    if request.get("patch"):
        cap = int(request.get("max_bytes", 4 * 1024 * 1024))
        patch = git([*DIFF, "--patch", old, new, "--"], env)
        result["patch"] = patch[:cap].decode("utf-8", "replace")
        result["truncated"] = len(patch) > cap
    return result
