"""Helpers (no tests) shared by the collect and lifecycle integration tests.

Writers are built the way an operator builds them: a configuration naming the test
repository as a workspace and a coding profile, a passing isolation control, then
`mode set ALIAS container --profiles code --apply`. The "agent" is a shell script run
in a real writer container with the exact spec a session gets.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
from pathlib import Path

from tests.integration.writers_support import write_workspaces as write_config_for
from tests.support.repos import git_out, run_git
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.control import run_control
from writerpool.pool.modes.change import set_mode
from writerpool.pool.modes.request import ModeRequest
from writerpool.pool.writer.container import writer_spec
from writerpool.runtime.hosts import open_host
from writerpool.runtime.image import resolve_image
from writerpool.state.writer import WriterState, load_state

AGENT_ENV = (
    "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.invalid "
    "GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.invalid; cd /work; "
)


def unique_alias(stem: str) -> str:
    """A workspace alias no other test uses: writer names and their containers are
    global to the Podman account, and a fence removes every container of its writer."""
    return f"{stem}{secrets.token_hex(3)}"


def write_workspaces(workspaces: dict[str, Path]) -> Paths:
    write_config_for(workspaces, wait=2)
    return Paths.from_env()


def ready_writer(
    alias: str,
    lifecycle: str = "persistent",
    tags: str = "none",
    cache: str = "none",
    writers: int = 1,
) -> str:
    """Control, then `mode set ALIAS container --apply`; return the first ready writer."""
    paths = Paths.from_env()
    if "isolation_control_passed" not in run_control(paths, open_host()).codes():
        raise AssertionError("the isolation control did not pass")
    request = ModeRequest(
        alias=alias,
        mode="container",
        profiles=("code",),
        lifecycle=lifecycle,
        network="none",
        tags=tags,
        cache=cache,
        writers=writers,
        apply=True,
        container_options_given=True,
    )
    report = set_mode(paths, open_host(), load_config(paths), request)
    if "writer_accepted" not in report.codes():
        raise AssertionError(report.render_text())
    return f"{alias}-w1"


def state_of(name: str) -> WriterState:
    state = load_state(Paths.from_env().writer_dir(name))
    assert state is not None
    return state


def clone_of(name: str) -> Path:
    return Paths.from_env().writer_dir(name) / "clone"


def run_agent(name: str, script: str) -> str:
    """Run `script` with bash in the writer's session container (its exact spec)."""
    paths = Paths.from_env()
    state = state_of(name)
    pool = load_config(paths).config.pool
    host = open_host()
    spec = writer_spec(paths, host, state, resolve_image(paths, state.image), pool, host.facts())
    done = open_host().run(spec, ["bash", "-euc", AGENT_ENV + script], timeout=600)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.out


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Mode, mtime and content digest of every entry below root (nothing followed)."""
    found: dict[str, tuple[int, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in [*dirnames, *filenames]:
            path = Path(dirpath) / entry
            st = path.lstat()
            digest = ""
            if path.is_file() and not path.is_symlink():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, digest)
    return found


def refs_of(repo: Path) -> dict[str, str]:
    out = git_out(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def collected(repo: Path, name: str) -> dict[str, str]:
    """Short name -> commit of what collection imported for writer `name`."""
    prefix = f"refs/remotes/writer-{name}/"
    return {k.removeprefix(prefix): v for k, v in refs_of(repo).items() if k.startswith(prefix)}


def tree_files(repo: Path, commit: str) -> dict[str, str]:
    out = git_out(repo, "ls-tree", "-r", "--format=%(path) %(objectname)", commit)
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def show(repo: Path, spec: str) -> str:
    return run_git(repo, "show", spec).out


def bundle_object_count(bundle: Path) -> int:
    """Objects in a bundle's pack: the count field of the PACK header after the refs."""
    data = bundle.read_bytes()
    start = data.index(b"\n\n") + 2
    magic, _version, count = struct.unpack(">4sII", data[start : start + 12])
    assert magic == b"PACK"
    return int(count)
