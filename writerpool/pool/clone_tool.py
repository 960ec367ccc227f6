"""The program writerpool runs inside throwaway writer containers (`python3 clone_tool.py`).

It uses the standard library only and never imports writerpool: it runs in the writer
image, against the clone mounted at /work. Input is one JSON object on stdin, output one
JSON object on stdout.

`inspect` reads the clone (mounted read-only) and changes nothing in it: git runs with
--no-optional-locks, a temporary index and a temporary object directory under /tmp that
borrows the clone's objects as alternates. Refs are read from the files themselves, so
a name git would refuse is still seen (and refused by the host). With `bundle`, the
changed branches and a synthetic WIP commit are written as a bundle to /out, from a
scratch repository that holds only synthetic ref names and none of the clone's config.

`reset` (clone mounted read-write) puts the clone back on a base fetched from a bundle
mounted at /base: refs, stash, reflogs, in-progress operations and untracked files go.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess  # noqa: TID251 - runs inside the container, not on the host
import sys
import tempfile
from typing import Any

WORK = "/work"
GIT_DIR = "/work/.git"
OUT = "/out"
BASE_BUNDLE = "/base/base.bundle"
MAX_REFS = 20_000
MAX_PACKED = 64 * 1024 * 1024
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
HEX = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
IDENTITY = {
    "GIT_AUTHOR_NAME": "writerpool",
    "GIT_AUTHOR_EMAIL": "writerpool@localhost",
    "GIT_COMMITTER_NAME": "writerpool",
    "GIT_COMMITTER_EMAIL": "writerpool@localhost",
}
# Settings that could hide work from the scan, run a program, or write elsewhere.
SAFE_CONFIG = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.untrackedCache=false",
    "core.splitIndex=false", "core.trustctime=true", "core.checkStat=default",
    "core.excludesFile=/dev/null", "core.attributesFile=/dev/null", "gc.auto=0",
    "maintenance.auto=false", "commit.gpgSign=false", "core.sparseCheckout=false",
    "index.sparse=false", "fetch.fsckObjects=false", "core.bare=false",
)  # fmt: skip
IN_PROGRESS = (
    "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "AUTO_MERGE", "CHERRY_PICK_HEAD",
    "REVERT_HEAD", "BISECT_LOG", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES",
    "BISECT_EXPECTED_REV", "BISECT_ANCESTORS_OK", "ORIG_HEAD", "FETCH_HEAD", "rebase-merge",
    "rebase-apply", "sequencer", "logs", "index", "index.lock", "HEAD.lock",
    "packed-refs.lock", "objects/info/alternates", "objects/info/http-alternates",
    "info/attributes", "info/grafts", "info/sparse-checkout", "shallow",
)  # fmt: skip


class ToolError(Exception):
    pass


def git_env(**extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_GRAFT_FILE": "/dev/null", "GIT_DIR": GIT_DIR, "GIT_WORK_TREE": WORK,
    }  # fmt: skip
    env.update(extra)
    return env


def git(args: list[str], env: dict[str, str], data: bytes | None = None) -> bytes:
    argv = ["git", "--no-optional-locks"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    done = subprocess.run(
        [*argv, *args], env=env, input=data, capture_output=True, cwd=WORK, check=False
    )
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise ToolError(f"git {args[0]} failed: {tail[0][:200]}")
    return done.stdout


# ------------------------------------------------------------------------- refs


def _read_small(path: bytes) -> bytes | None:
    """A regular file's bytes (bounded), or None when it is anything else."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
        return None
    with open(path, "rb") as handle:
        return handle.read(4097).rstrip(b"\r\n")


def read_refs() -> tuple[dict[bytes, bytes], dict[bytes, str]]:
    """Every ref as raw name -> raw value (loose over packed), and refs that are odd."""
    refs: dict[bytes, bytes] = {}
    odd: dict[bytes, str] = {}
    packed = os.path.join(GIT_DIR.encode(), b"packed-refs")
    if os.path.lexists(packed):
        st = os.lstat(packed)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_PACKED:
            raise ToolError("packed-refs is not a plain file of a sane size")
        with open(packed, "rb") as handle:
            data = handle.read()
        for line in data.splitlines():
            if line and not line.startswith((b"#", b"^")):
                oid, _, name = line.partition(b" ")
                refs[name] = oid
    top = os.path.join(GIT_DIR.encode(), b"refs")
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = os.path.relpath(dirpath, GIT_DIR.encode())
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                odd[os.path.join(rel_dir, name)] = "a linked directory"
        for name in filenames:
            rel = os.path.join(rel_dir, name)
            value = _read_small(os.path.join(dirpath, name))
            if value is None:
                odd[rel] = "not a plain file"
            else:
                refs[rel] = value
        if len(refs) + len(odd) > MAX_REFS:
            raise ToolError("the clone holds too many refs")
    return refs, odd


def object_types(oids: list[str], env: dict[str, str]) -> dict[str, str]:
    if not oids:
        return {}
    query = ("\n".join(oids) + "\n").encode()
    out = git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], env, query)
    types: dict[str, str] = {}
    for oid, line in zip(oids, out.decode().splitlines(), strict=True):
        types[oid] = line.split()[1] if line.startswith(oid) else "missing"
    return types


def _name(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _branch(raw: bytes) -> str:
    """A branch's name from its full ref name (undecodable bytes kept as surrogates)."""
    return _name(raw.removeprefix(b"refs/heads/"))


def branches(
    refs: dict[bytes, bytes], odd: dict[bytes, str], env: dict[str, str]
) -> list[dict[str, Any]]:
    """Branches under refs/heads/: name, commit, and what is wrong with it (if anything)."""
    heads = {k: v for k, v in refs.items() if k.startswith(b"refs/heads/")}
    types = object_types(sorted({v.decode() for v in heads.values() if HEX.fullmatch(v)}), env)
    found = []
    for raw, value in sorted(heads.items()):
        entry: dict[str, Any] = {"name": _branch(raw), "commit": None, "problem": None}
        if not HEX.fullmatch(value):
            entry["problem"] = "symbolic" if value.startswith(b"ref: ") else "malformed"
        elif types.get(value.decode()) != "commit":
            entry["problem"] = "not a commit"
        else:
            entry["commit"] = value.decode()
        found.append(entry)
    for raw, why in sorted(odd.items()):
        if raw.startswith(b"refs/heads/"):
            found.append({"name": _branch(raw), "commit": None, "problem": why})
    return found


def read_head(refs: dict[bytes, bytes]) -> tuple[str, str | None]:
    """HEAD's target ("refs/heads/x" or "detached") and its commit (None when unborn)."""
    value = _read_small(os.path.join(GIT_DIR.encode(), b"HEAD"))
    if value is None:
        raise ToolError("HEAD is not a plain file")
    if HEX.fullmatch(value):
        return "detached", value.decode()
    if not value.startswith(b"ref: "):
        raise ToolError("HEAD is malformed")
    target = value[5:].strip()
    commit = refs.get(target)
    return _name(target), commit.decode() if commit and HEX.fullmatch(commit) else None


# -------------------------------------------------------------------------- WIP


def _clear_index_flags(env: dict[str, str]) -> None:
    # assume-unchanged and skip-worktree entries would hide changes from `git add -A`.
    listing = git(["ls-files", "-v", "-z"], env).split(b"\0")
    hidden = [e[2:] for e in listing if e[:1].islower()]
    skipped = [e[2:] for e in listing if e[:1] == b"S"]
    for flag, paths in (("--no-assume-unchanged", hidden), ("--no-skip-worktree", skipped)):
        if paths:
            git(["update-index", flag, "-z", "--stdin"], env, b"\0".join(paths) + b"\0")


def scratch_env(scratch: str, **extra: str) -> dict[str, str]:
    """git reading the clone's objects but writing new ones (and an index) to scratch."""
    objects = os.path.join(scratch, "objects")
    clone_objects = os.path.join(GIT_DIR, "objects")
    return git_env(GIT_OBJECT_DIRECTORY=objects, GIT_ALTERNATE_OBJECT_DIRECTORIES=clone_objects,
                   **extra)  # fmt: skip


def _stage_everything(scratch: str, head_commit: str | None, copy_index: bool) -> str:
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
    git(["add", "-A", "--", "."], env)
    # Files ignored only by .git/info/exclude are the agent's work too: add them by force.
    extra = git(["ls-files", "-z", "--others", "--exclude-per-directory=.gitignore"], env)
    if extra.strip(b"\0"):
        literal = dict(env, GIT_LITERAL_PATHSPECS="1")
        git(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"], literal, extra)
    return git(["write-tree"], env).decode().strip()


def capture_wip(scratch: str, head_commit: str | None) -> str:
    """The tree of the working tree as `git add -A` sees it (objects go to scratch)."""
    os.makedirs(os.path.join(scratch, "objects"), exist_ok=True)
    try:
        return _stage_everything(scratch, head_commit, copy_index=True)
    except ToolError:
        # A damaged or unusual index: start from HEAD's tree and hash every file.
        return _stage_everything(scratch, head_commit, copy_index=False)


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


# ----------------------------------------------------------------------- bundle


def _existing(oids: list[str], env: dict[str, str]) -> list[str]:
    types = object_types(sorted(set(oids)), env)
    return [o for o in sorted(set(oids)) if types.get(o) == "commit"]


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
    fmt = git(["rev-parse", "--show-object-format"], git_env()).decode().strip()
    git(["init", "-q", "--bare", "--template=", f"--object-format={fmt}", export], plain)
    with open(os.path.join(export, "objects", "info", "alternates"), "w") as handle:
        handle.write(
            os.path.join(scratch, "objects") + "\n" + os.path.join(GIT_DIR, "objects") + "\n"
        )
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
        if is_new(head_commit, _existing(tips + list(baseline.values()), env), env):
            exports.append({"name": "detached-head", "commit": head_commit, "kind": "detached"})
    return exports


def inspect(request: dict[str, Any]) -> dict[str, Any]:
    env = git_env()
    refs, odd = read_refs()
    head, head_commit = read_head(refs)
    found = branches(refs, odd, env)
    baseline: dict[str, str] = request.get("baseline", {})
    scratch = tempfile.mkdtemp(prefix="inspect-", dir="/tmp")
    tree = capture_wip(scratch, head_commit)
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
    exclude = _existing(list(request.get("exclude", [])), wip_env)
    for number, entry in enumerate(exports):
        entry["ref"] = f"refs/heads/wp-{number}"
        entry["in_bundle"] = is_new(entry["commit"], exclude, wip_env)
    return {"bundle": write_bundle(scratch, exports, exclude), "excluded": exclude}


# ------------------------------------------------------------------------ reset


def _remove(rel: str) -> None:
    path = os.path.join(GIT_DIR, rel)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def reset(request: dict[str, Any]) -> dict[str, Any]:
    branch, commit, source = request["branch"], request["commit"], request["bundle_ref"]
    for rel in IN_PROGRESS:
        _remove(rel)
    # Every ref goes (branches, tags, stash, notes, anything planted), then the base returns.
    _remove("packed-refs")
    _remove("refs")
    for sub in ("refs/heads", "refs/tags"):
        os.makedirs(os.path.join(GIT_DIR, sub))
    with open(os.path.join(GIT_DIR, "HEAD"), "w") as handle:
        handle.write(f"ref: refs/heads/{branch}\n")
    os.makedirs(os.path.join(GIT_DIR, "info"), exist_ok=True)
    with open(os.path.join(GIT_DIR, "info", "exclude"), "w") as handle:
        handle.write("")
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
    git(["reset", "-q", "--hard", f"refs/heads/{branch}"], env)
    git(["clean", "-ffdxq"], env)
    for rel in ("logs", "ORIG_HEAD", "COMMIT_EDITMSG"):
        _remove(rel)
    status = git(["status", "--porcelain", "--ignored", "-z"], env)
    return {"head": f"refs/heads/{branch}", "commit": got, "clean": not status}


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        request = json.loads(sys.stdin.read() or "{}")
        if command == "inspect":
            result = inspect(request)
        elif command == "reset":
            result = reset(request)
        else:
            raise ToolError(f"unknown command {command!r}")
    except (ToolError, OSError, ValueError, KeyError) as exc:
        json.dump({"error": f"{type(exc).__name__}: {exc}"[:500]}, sys.stdout)
        return 1
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
