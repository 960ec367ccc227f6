"""git inside the throwaway container: fixed environment, settings that run nothing."""

from __future__ import annotations

import os
import re
import subprocess  # noqa: TID251 - runs inside the container, not on the host

WORK = "/work"
GIT_DIR = "/work/.git"
CLONE_OBJECTS = "/work/.git/objects"
HEX = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
# Settings that could hide work from the scan, run a program, or write elsewhere.
SAFE_CONFIG = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.untrackedCache=false",
    "core.splitIndex=false", "core.trustctime=true", "core.checkStat=default",
    "core.excludesFile=/dev/null", "core.attributesFile=/dev/null", "gc.auto=0",
    "maintenance.auto=false", "commit.gpgSign=false", "core.sparseCheckout=false",
    "index.sparse=false", "fetch.fsckObjects=false", "core.bare=false",
)  # fmt: skip


class ToolError(Exception):
    pass


def git_env(git_dir: str = GIT_DIR, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_GRAFT_FILE": "/dev/null", "GIT_DIR": git_dir, "GIT_WORK_TREE": WORK,
    }  # fmt: skip
    env.update(extra)
    return env


def git_argv(args: list[str]) -> list[str]:
    argv = ["git", "--no-optional-locks"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    return [*argv, *args]


def git(
    args: list[str],
    env: dict[str, str],
    data: bytes | None = None,
    warnings: list[bytes] | None = None,
    allow: tuple[int, ...] = (0,),
) -> bytes:
    done = subprocess.run(
        git_argv(args), env=env, input=data, capture_output=True, cwd=WORK, check=False
    )
    if warnings is not None:
        warnings.append(done.stderr)
    if done.returncode not in allow:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise ToolError(f"git {args[0]} failed: {tail[0][:200]}")
    return done.stdout


def object_format() -> str:
    """The clone's object format, read from its config as text (nothing is run)."""
    with open(os.path.join(GIT_DIR, "config"), "rb") as handle:
        text = handle.read(1024 * 1024).lower()
    return "sha256" if re.search(rb"objectformat\s*=\s*sha256", text) else "sha1"


def own_git_dir(scratch: str) -> str:
    """A git directory of our own over the clone's objects and work tree.

    git reads the configuration of its git directory, and the clone's could name
    filters, hooks, includes or an fsmonitor. Reading the clone through this directory
    instead, git runs nothing the clone names, so its report cannot be forged that way.
    """
    gitdir = os.path.join(scratch, "gitdir")
    if not os.path.isdir(gitdir):
        os.makedirs(os.path.join(gitdir, "refs", "heads"))
        sha256 = object_format() == "sha256"
        config = f"[core]\n\trepositoryformatversion = {int(sha256)}\n\tbare = false\n"
        config += "[extensions]\n\tobjectformat = sha256\n" if sha256 else ""
        for name, text in (("HEAD", "ref: refs/heads/unborn\n"), ("config", config)):
            with open(os.path.join(gitdir, name), "w") as handle:
                handle.write(text)
    return gitdir


def read_env(scratch: str) -> dict[str, str]:
    """git reading the clone's objects and work tree, with none of its configuration."""
    return git_env(own_git_dir(scratch), GIT_OBJECT_DIRECTORY=CLONE_OBJECTS)


def scratch_env(scratch: str, **extra: str) -> dict[str, str]:
    """As read_env, but new objects (and an index) go to scratch, never to the clone."""
    objects = os.path.join(scratch, "objects")
    os.makedirs(objects, exist_ok=True)
    return git_env(own_git_dir(scratch), GIT_OBJECT_DIRECTORY=objects,
                   GIT_ALTERNATE_OBJECT_DIRECTORIES=CLONE_OBJECTS, **extra)  # fmt: skip


def object_types(oids: list[str], env: dict[str, str]) -> dict[str, str]:
    if not oids:
        return {}
    query = ("\n".join(oids) + "\n").encode()
    out = git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], env, query)
    types: dict[str, str] = {}
    for oid, line in zip(oids, out.decode().splitlines(), strict=True):
        types[oid] = line.split()[1] if line.startswith(oid) else "missing"
    return types


def existing_commits(oids: list[str], env: dict[str, str]) -> list[str]:
    types = object_types(sorted(set(oids)), env)
    return [o for o in sorted(set(oids)) if types.get(o) == "commit"]


def peeled_commits(oids: list[str], env: dict[str, str]) -> dict[str, str]:
    """Each object that is a commit, or a tag naming one (through tags of tags), mapped
    to that commit; others are left out."""
    wanted = sorted(set(oids))
    if not wanted:
        return {}
    query = "".join(f"{o}^{{commit}}\n" for o in wanted).encode()
    out = git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], env, query)
    peeled: dict[str, str] = {}
    for oid, line in zip(wanted, out.decode().splitlines(), strict=True):
        parts = line.split()
        if len(parts) == 2 and parts[1] == "commit" and HEX.fullmatch(parts[0].encode()):
            peeled[oid] = parts[0]
    return peeled
