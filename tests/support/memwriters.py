"""Accepted writers on a host kept in memory (tests/support/memhost.py): a workspace
`demo` with a checkout, its container mode stored, a passing control, and writers whose
recorded fingerprint is that of the spec the host gives them, so the pool's logic above
the seam (leases, status, refusals) takes them as ready without running a container. A
clone is never looked into there: an inspection fails (nothing runs in memory), so a
writer is judged clean only by a recorded verdict (`judged`)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.writers_support import write_workspaces
from tests.support.memhost import MemoryHost
from tests.support.repos import git_out, make_repo
from writerpool.config.models import Config, Pool
from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.accept import fingerprint_groups, fingerprint_of
from writerpool.pool.acceptance.control import ControlRecord, harness_digest, save_control
from writerpool.pool.provision.make import settings_digest
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.verdicts import Verdict, lease_count, remember
from writerpool.state.writer import Baseline, BaseRecord, WriterState, now, save_state

IMAGE = "b" * 64
ALIAS = "demo"


def memory_pool(tmp_path: Path, writers: int, *, baseline: bool = True) -> tuple[Paths, MemoryHost]:
    """The workspace, its mode and `writers` accepted writers on a memory host `local`;
    without `baseline`, writers whose clone has no baseline recorded yet (a status then
    does not look into it)."""
    settings = ContainerSettings(profiles=("code",), writers=writers, base="main", network="none")
    repo = make_repo(tmp_path / "checkout", commits=2, files=2)
    write_workspaces({ALIAS: repo})
    paths = Paths.from_env()
    store_entry(paths, ALIAS, ModeEntry(mode="container", container=settings))
    host = MemoryHost("local", images=(IMAGE,))
    save_control(paths, ControlRecord(passed=True, at=now(), harness_digest=harness_digest()))
    commit = git_out(repo, "rev-parse", "main")
    for index in range(1, writers + 1):
        _accepted(paths, host, settings, index, commit, baseline)
    return paths, host


def _accepted(
    paths: Paths, host: MemoryHost, settings: ContainerSettings, index: int, commit: str,
    baseline: bool,
) -> WriterState:  # fmt: skip
    fields = {
        "name": f"{ALIAS}-w{index}", "alias": ALIAS, "settings_digest": settings_digest(settings),
        "image": IMAGE, "network": "none", "cache": "none", "lifecycle": "persistent",
        "tags": "none", "profiles": ["code"], "host": host.name,
        "base": BaseRecord(name="main", ref="refs/heads/main", commit=commit, branch="main"),
        "baseline": Baseline(head="main", commit=commit, branches={"main": commit})
        if baseline else None,
    }  # fmt: skip
    state = WriterState.model_validate(fields)
    wdir = paths.writer_dir(state.name)
    save_state(wdir, state)
    host.create_storage(writer_of(paths, state), cache=False, adopt=False)
    fingerprint = fingerprint_of(fingerprint_groups(paths, host, state, Config(pool=Pool())))
    return save_state(wdir, state.model_copy(update={"phase": "ready", "fingerprint": fingerprint}))


def judged(paths: Paths, name: str, code: str, reason: str) -> None:
    """Record the guard's verdict on the writer's clone, current until its next lease."""
    wdir = paths.writer_dir(name)
    remember(wdir, lease_count(wdir), Verdict(code, reason, ()))
