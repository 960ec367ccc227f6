"""Provisioning one writer: its storage on its host, a full clone there from a bundle of
the base (pool/provision/stream.py), verified, recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from writerpool.atomic import ensure_private_dir
from writerpool.config.models import Pool
from writerpool.config.modes import ContainerSettings
from writerpool.config.paths import BOOKKEEPING, Paths
from writerpool.crash import crash_point
from writerpool.gitops.base import BaseRef
from writerpool.pool.provision.stream import clone_on_host
from writerpool.pool.writer.container import writer_image
from writerpool.report import Report
from writerpool.runtime.host import WriterHost, writer_at
from writerpool.state.writer import BaseRecord, WriterState, load_state, save_state

MAX_WRITERS = 16


def writer_name(alias: str, index: int) -> str:
    return f"{alias}-w{index}"


def settings_digest(settings: ContainerSettings) -> str:
    """Digest of what a writer was provisioned with; a difference is never silently applied."""
    keys = {
        "image": settings.image,
        "network": settings.network,
        "cache": settings.cache,
        "tags": settings.tags,
    }
    return "sha256:" + hashlib.sha256(json.dumps(keys, sort_keys=True).encode()).hexdigest()


def clone_branch(base: BaseRef) -> str:
    """The branch name inside the clone: a remote base `origin/x` becomes `x`."""
    return base.name.split("/", 1)[1] if base.ref.startswith("refs/remotes/") else base.name


def base_record(base: BaseRef) -> BaseRecord:
    return BaseRecord(name=base.name, ref=base.ref, commit=base.commit, branch=clone_branch(base))


def provision(
    paths: Paths,
    host: WriterHost,
    alias: str,
    name: str,
    repo: Path,
    settings: ContainerSettings,
    base: BaseRef,
    report: Report,
    pool: Pool,
) -> WriterState:
    """Provision (or finish an interrupted provisioning of) one writer on `host`; lease
    held. Its storage is made there and its clone made there from a streamed bundle
    (pool/provision/stream.py); the state records the host's name."""
    target = f"writer/{alias}/{name}"
    placed = host.name
    # The image by ID on the writer's host first: without it nothing is made there.
    writer_image(paths, host, settings.image)
    writer = writer_at(paths, name, placed)
    ensure_private_dir(writer.record.path)
    state = WriterState(
        name=name,
        alias=alias,
        settings_digest=settings_digest(settings),
        image=settings.image,
        network=settings.network,
        cache=settings.cache,
        lifecycle=settings.lifecycle,
        tags=settings.tags,
        profiles=settings.profiles,
        base=base_record(base),
        host=placed,
    )
    # Recorded first, so a kill mid-way leaves a readable state that the next run redoes.
    save_state(writer.record.path, state)
    crash_point("provision.state_recorded")
    host.create_storage(writer, cache=False, adopt=False)
    baseline = clone_on_host(paths, host, state, pool, repo, base, report)
    crash_point("provision.cloned")
    host.create_storage(writer, cache=settings.cache != "none", adopt=False)
    state = save_state(
        writer.record.path,
        state.model_copy(
            update={"baseline": baseline, "phase": "not_ready", "reason": "writer_provisioned"}
        ),
    )
    report.add(
        "writer_provisioned",
        "ok",
        target,
        f"full clone of {base.name} at {base.commit[:12]}; not yet accepted",
    )
    return state


def existing_states(paths: Paths, alias: str) -> dict[int, WriterState | None]:
    """Writers of a workspace that have a directory, by index (None: no state file)."""
    found: dict[int, WriterState | None] = {}
    for index in range(1, MAX_WRITERS + 1):
        wdir = paths.writer_dir(writer_name(alias, index))
        # A removed writer leaves its lease files only: that is no writer.
        if wdir.is_dir() and any(p.name not in BOOKKEEPING for p in wdir.iterdir()):
            found[index] = load_state(wdir)
    return found
