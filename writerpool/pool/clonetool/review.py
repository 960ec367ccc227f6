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


def _tip(refs: dict[bytes, bytes], branch: str | None, head_commit: str | None) -> str:
    if branch is None:
        if head_commit is None:
            raise ToolError("HEAD has no commit")
        return head_commit
    value = refs.get(b"refs/heads/" + branch.encode("utf-8", "surrogateescape"))
    if value is None or not HEX.fullmatch(value):
        raise ToolError("no readable branch of that name in the clone")
    return value.decode()


def _log(
    tip: str, exclude: list[str], limit: int, chars: int, env: dict[str, str]
) -> list[dict[str, Any]]:
    """At most `limit` commits; each text field cut at `chars` characters."""
    out = git(["log", "--no-color", f"--max-count={limit}", f"--format={FORMAT}", tip,
               "--not", *exclude, "--"], env)  # fmt: skip
    commits = []
    for record in out.decode("utf-8", "replace").split("\x1e"):
        fields = record.strip("\n").split(SEP)
        if len(fields) != 6:
            continue
        commit, parents, author, email, date, subject = (f[:chars] for f in fields)
        commits.append({"commit": commit, "parents": parents.split()[:64], "author": author,
                        "email": email, "date": date, "subject": subject})  # fmt: skip
    return commits


def _numstat(old: str, new: str, env: dict[str, str]) -> list[dict[str, Any]]:
    out = git([*DIFF, "--numstat", "-z", old, new, "--"], env)
    files = []
    for item in out.split(b"\0"):
        parts = item.split(b"\t", 2)
        if len(parts) != 3:
            continue
        added, removed, path = parts
        binary = added == b"-"
        files.append({"path": path.decode("utf-8", "surrogateescape"), "binary": binary,
                      "added": 0 if binary else int(added),
                      "removed": 0 if binary else int(removed)})  # fmt: skip
    return files


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
        chars = int(request["limits"]["message_chars"])
        result["commits"] = _log(new, exclude, limit, chars, env)
        merge = git(["merge-base", base, new], env, allow=(0, 1)).decode().strip()
        old = merge or EMPTY_TREE
    result.update(tip=new, old=old, files=_numstat(old, new, env))
    if request.get("patch"):
        cap = int(request.get("max_bytes", 4 * 1024 * 1024))
        patch = git([*DIFF, "--patch", old, new, "--"], env)
        result["patch"] = patch[:cap].decode("utf-8", "replace")
        result["truncated"] = len(patch) > cap
    return result
