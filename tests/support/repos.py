"""Deterministic test repositories, made offline with `git fast-import`.

Fixed identity and dates, so the same arguments give the same commit ids.
10,000 commits take a few seconds.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import IDENTITY
from writerpool import proc
from writerpool.gitops.hostgit import git_env

EPOCH = 1_700_000_000
_WHO = f"{IDENTITY['GIT_AUTHOR_NAME']} <{IDENTITY['GIT_AUTHOR_EMAIL']}>"


def run_git(
    repo: Path, *args: str, input: bytes | None = None, check: bool = True
) -> proc.Completed:
    """git in a test repository: clean environment plus the fixed test identity."""
    env = git_env()
    env.update(IDENTITY)
    return proc.run(["git", "-C", str(repo), *args], env=env, input=input, check=check, timeout=600)


def git_out(repo: Path, *args: str) -> str:
    return run_git(repo, *args).out.strip()


def _data(payload: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(payload), payload)


def _file_name(index: int) -> str:
    return f"src/file-{index:04d}.txt"


def _content(index: int, revision: int) -> bytes:
    lines = [f"file {index} revision {revision}"] + [f"line {n} of file {index}" for n in range(8)]
    return ("\n".join(lines) + "\n").encode()


def fast_import_stream(commits: int, files: int, branch: str = "main") -> bytes:
    """A fast-import stream: the first commit adds `files` files, each later one
    changes one file, round robin."""
    out: list[bytes] = []
    for number in range(commits):
        when = f"{EPOCH + number * 60} +0000"
        out.append(f"commit refs/heads/{branch}\n".encode())
        out.append(f"author {_WHO} {when}\ncommitter {_WHO} {when}\n".encode())
        out.append(_data(f"commit {number}".encode()))
        changed = range(files) if number == 0 else [number % files]
        for index in changed:
            out.append(f"M 100644 inline {_file_name(index)}\n".encode())
            out.append(_data(_content(index, number)))
        out.append(b"\n")
    return b"".join(out)


def make_repo(path: Path, commits: int, files: int = 50) -> Path:
    """A non-bare repository at `path` with `commits` commits on `main`, checked out."""
    if commits < 1 or files < 1:
        raise ValueError("a test repository needs at least one commit and one file")
    path.mkdir(parents=True, exist_ok=True)
    run_git(path, "init", "-q", "--initial-branch=main")
    run_git(
        path,
        "fast-import",
        "--quiet",
        "--date-format=raw",
        input=fast_import_stream(commits, files),
    )
    run_git(path, "reset", "-q", "--hard", "main")
    return path


def commit_file(repo: Path, name: str, content: str, message: str) -> str:
    """Write, add and commit one file on the current branch; return the commit id."""
    target = repo / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    run_git(repo, "add", "--", name)
    run_git(repo, "commit", "-q", "-m", message)
    return git_out(repo, "rev-parse", "HEAD")
