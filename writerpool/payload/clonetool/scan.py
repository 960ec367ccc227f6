"""`inspect`: what the clone holds, the WIP tree, and (asked to) the bundle."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

from .content import git_state, judge
from .gitrun import (
    CLONE_OBJECTS,
    HEX,
    existing_commits,
    git,
    git_env,
    object_format,
    peeled_commits,
    read_env,
    scratch_env,
)
from .gitsnap import snapshot
from .refs import branches, read_head, read_refs
from .storage import held

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
IDENTITY = {
    "GIT_AUTHOR_NAME": "writerpool",
    "GIT_AUTHOR_EMAIL": "writerpool@localhost",
    "GIT_COMMITTER_NAME": "writerpool",
    "GIT_COMMITTER_EMAIL": "writerpool@localhost",
}


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


@dataclass(frozen=True)
class BundlePlan:
    """What `git bundle create` bundles: synthetic refs in a scratch repository that holds
    none of the clone's config (stream.py runs it, writing to stdout)."""

    env: dict[str, str]
    refs: list[str]
    exclude: list[str]


def plan_bundle(
    scratch: str, exports: list[dict[str, Any]], exclude: list[str]
) -> BundlePlan | None:
    """The bundle of the exports that carry new history; None when none does."""
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
    return BundlePlan(env, [e["ref"] for e in wanted], exclude)


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


def _extra_refs(
    refs: dict[bytes, bytes], odd: dict[bytes, str], known: list[str], env: dict[str, str]
) -> list[dict[str, Any]]:
    """Refs outside refs/heads/ (the stash aside): never exported; those that reach
    history no branch or baseline commit reaches are work. Tags are listed only then
    (the baseline's tags are compared apart); a tag object counts as the commit it names."""
    names = sorted(n for n in {*refs, *odd} if not n.startswith(b"refs/heads/")
                   and n != b"refs/stash")  # fmt: skip
    exclude = existing_commits(known, env)
    values = [refs[n].decode() for n in names if HEX.fullmatch(refs.get(n, b""))]
    commits = peeled_commits(values, env)
    found = []
    for name in names:  # bounded: read_refs caps the refs at MAX_REFS
        commit = commits.get(refs.get(name, b"").decode(errors="replace"))
        new = commit is not None and (not exclude or is_new(commit, exclude, env))
        if name.startswith(b"refs/tags/") and not new:
            continue
        found.append({"name": name.decode("utf-8", "surrogateescape"), "new": new})
    # Refs that reach new history first: the cap must never drop work behind many
    # refs that are not.
    found.sort(key=lambda ref: not ref["new"])
    return found[:200]


def inspect(request: dict[str, Any]) -> dict[str, Any]:
    """The `inspect` command: what the clone holds (`collect`, stream.py, adds the bundle)."""
    return scan(request)[0]


def scan(request: dict[str, Any], bundle: bool = False) -> tuple[dict[str, Any], BundlePlan | None]:
    scratch = tempfile.mkdtemp(prefix="inspect-", dir="/tmp")
    env = read_env(scratch)
    refs, odd = read_refs(request["limits"])
    head, head_commit = read_head(refs)
    found = branches(refs, odd, env)
    baseline: dict[str, str] = request.get("baseline", {})
    content = judge(scratch, head_commit, request.get("caps", {}), env)
    head_tree = EMPTY_TREE
    if head_commit is not None:
        head_tree = git(["rev-parse", f"{head_commit}^{{tree}}"], env).decode().strip()
    wip = content.tree if content.tree != head_tree else None
    exports = _exports(found, baseline, head, head_commit, env)
    if wip is not None:
        label = "detached-head" if head == "detached" else head.removeprefix("refs/heads/")
        exports.append({"name": f"{label}-wip", "commit": None, "kind": "wip"})
    tips = [e["commit"] for e in found if e["commit"] is not None]
    known = [*tips, *baseline.values(), *request.get("exclude", []), *filter(None, [head_commit])]
    tags = {k.decode("utf-8", "surrogateescape"): v.decode(errors="replace")
            for k, v in refs.items() if k.startswith(b"refs/tags/")}  # fmt: skip
    result: dict[str, Any] = {
        "head": head, "head_commit": head_commit, "branches": found,
        "stash": b"refs/stash" in refs or b"refs/stash" in odd,
        "tags": len(tags), "tag_refs": tags,
        "dirty": wip is not None, "wip_tree": wip, "exports": exports, "bundle": None,
        "unreadable": bool(content.found.report()["counts"].get("unreadable")),
        "extra_refs": _extra_refs(refs, odd, known, env),
        "git_state": git_state(), "index_matches": content.index_ok,
        "git_dir": snapshot(request["git_dir"]) if request.get("git_dir") else None,
        "cache": held("cache"),
        **content.found.report(),
    }  # fmt: skip
    if not bundle:
        return result, None
    plan = _collect(request, result, scratch)
    result.update(bundle="collect.bundle" if plan else None, excluded=plan.exclude if plan else [])
    return result, plan


def _collect(request: dict[str, Any], result: dict[str, Any], scratch: str) -> BundlePlan | None:
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
    return plan_bundle(scratch, exports, exclude)
