"""git inside the throwaway container: fixed environment, settings that run nothing."""

from __future__ import annotations

import os
import re
import subprocess  # noqa: TID251 - runs inside the container, not on the host

WORK = "/work"
GIT_DIR = "/work/.git"
OUT = "/out"
BASE_BUNDLE = "/base/base.bundle"
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


def git_env(**extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_GRAFT_FILE": "/dev/null", "GIT_DIR": GIT_DIR, "GIT_WORK_TREE": WORK,
    }  # fmt: skip
    env.update(extra)
    return env


def git(
    args: list[str],
    env: dict[str, str],
    data: bytes | None = None,
    warnings: list[bytes] | None = None,
) -> bytes:
    argv = ["git", "--no-optional-locks"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    done = subprocess.run(
        [*argv, *args], env=env, input=data, capture_output=True, cwd=WORK, check=False
    )
    if warnings is not None:
        warnings.append(done.stderr)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise ToolError(f"git {args[0]} failed: {tail[0][:200]}")
    return done.stdout


def scratch_env(scratch: str, **extra: str) -> dict[str, str]:
    """git reading the clone's objects but writing new ones (and an index) to scratch."""
    objects = os.path.join(scratch, "objects")
    clone_objects = os.path.join(GIT_DIR, "objects")
    return git_env(GIT_OBJECT_DIRECTORY=objects, GIT_ALTERNATE_OBJECT_DIRECTORIES=clone_objects,
                   **extra)  # fmt: skip


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
