"""The writers directory, where every writer's lease lives: private, and locks that hold."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from pathlib import Path

from writerpool.doctor.model import CheckContext, CheckResult

SUBJECT = "writers"


def lease_dir(ctx: CheckContext) -> list[CheckResult]:
    path, user = ctx.paths.writers_dir, ctx.facts.user
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return [
            CheckResult(
                "lease_dir",
                "ok",
                SUBJECT,
                "not created yet; provisioning makes it 0700",
                data={"exists": False},
            )
        ]
    except OSError as exc:
        return [
            _error(
                f"the writers directory cannot be inspected ({exc.strerror})",
                f"give {user} access to writerpool's state directory",
            )
        ]
    problem = _ownership_problem(st, ctx.facts.uid, user)
    if problem is None:
        lock = lock_problem(path)
        if lock is None:
            return [
                CheckResult(
                    "lease_dir",
                    "ok",
                    SUBJECT,
                    f"owned by {user}, 0700, exclusive locks work",
                    data={"exists": True},
                )
            ]
        problem = (
            lock,
            "keep writerpool's state directory on a local file system "
            "(XDG_STATE_HOME chooses where it is)",
        )
    return [_error(*problem)]


def _ownership_problem(st: os.stat_result, uid: int, user: str) -> tuple[str, str] | None:
    """(message, remedy) when the directory is not a private directory of the user."""
    if not stat.S_ISDIR(st.st_mode):
        return (
            "the writers directory is not a directory",
            "move it aside; provisioning recreates it",
        )
    if st.st_uid != uid:
        return (
            f"the writers directory belongs to uid {st.st_uid}, not {user}",
            f"as root: chown -R {user} on writerpool's writers directory",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        return (
            f"the writers directory is mode {mode:04o}, not 0700: other users could "
            "reach writers' clones and agent directories",
            "chmod 0700 on writerpool's writers directory",
        )
    return None


def _error(message: str, remedy: str) -> CheckResult:
    return CheckResult("lease_dir", "error", SUBJECT, message, remedy, blocking=True)


def lock_problem(directory: Path) -> str | None:
    """Take an exclusive flock on a scratch file and make sure a second open file
    description cannot take it too (flock conflicts per open file, even in one process)."""
    try:
        fd, scratch = tempfile.mkstemp(prefix=".doctor-lock-", dir=directory)
    except OSError as exc:
        return f"no scratch lock file can be made in the writers directory ({exc.strerror})"
    second = -1
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            return f"an exclusive file lock fails there ({exc.strerror})"
        second = os.open(scratch, os.O_RDWR)
        try:
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        return "file locks are not exclusive there: two holders got the same lock"
    finally:
        if second >= 0:
            os.close(second)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(scratch)
