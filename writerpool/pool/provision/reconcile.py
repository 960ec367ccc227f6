"""Per-writer steps of reconciliation, each under the writer's lease and fence."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from writerpool.agent.backends import backend_for, remove_credentials
from writerpool.config.hosts import LOCAL
from writerpool.config.models import Config, LoadedConfig
from writerpool.config.modes import ContainerSettings, host_for
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError, failure, is_disk_full
from writerpool.gitops.base import BaseRef
from writerpool.pool.acceptance.accept import accept, readiness
from writerpool.pool.provision.make import provision, writer_name
from writerpool.pool.writer.container import writer_of
from writerpool.pool.writer.fence import fence
from writerpool.pool.writer.lease import Lease, LeaseBatch, leased
from writerpool.pool.writer.work import has_uncollected_work
from writerpool.report import Report, Step, quiet
from writerpool.runtime.host import WriterHost, writer_at
from writerpool.runtime.hosts import WriterHosts
from writerpool.state.writer import WriterState, load_state, save_state
from writerpool.tree_removal import remove_path


@dataclass
class PoolContext:
    paths: Paths
    host: WriterHost
    loaded: LoadedConfig
    alias: str
    settings: ContainerSettings
    base: BaseRef | None
    report: Report
    apply: bool
    discard: bool
    step: Step = quiet
    leases: LeaseBatch | None = None  # the writers' leases, taken with one wait
    # The hosts the command reaches (each over SSH connected once); None: `host` only.
    hosts: WriterHosts | None = None

    def host_of(self, name: str, placed: str = LOCAL) -> WriterHost:
        """The host writer `name` is on: its state's, or `placed` for a writer with no
        readable state (a new one). A host that cannot be reached raises
        writer_host_unreachable, which each step reports for that writer."""
        if self.hosts is None:
            return self.host
        try:
            state = load_state(self.paths.writer_dir(name))
        except WriterpoolError:
            state = None
        return self.hosts.get(state.host if state is not None else placed)


@contextmanager
def operate(
    paths: Paths, host: WriterHost, wait: float, name: str, batch: LeaseBatch | None = None
) -> Iterator[Lease]:
    """Hold the writer's lease and prove no container of it exists. With a `batch`, its
    lease (taken with the command's one wait) is used and stays held after this."""
    with contextlib.ExitStack() as stack:
        if batch is not None:
            lease = batch.take(name)
        else:
            lease = stack.enter_context(leased(paths.writer_dir(name), wait))
        writer = writer_at(paths, name, host.name)
        fence(host, writer, lease)
        # With the lease held no session runs: a credential left by a killed server goes.
        remove_credentials(writer.record.rendered_agent)
        yield lease


def _target(alias: str, name: str) -> str:
    return f"writer/{alias}/{name}"


def _record_failure(ctx: PoolContext, name: str, exc: WriterpoolError) -> None:
    ctx.report.add(exc.code, "error", _target(ctx.alias, name), exc.message)


def stateless_clone(
    ctx: PoolContext, name: str, state: WriterState | None, placed: str = LOCAL
) -> bool:
    """A clone that no usable state vouches for: never overwritten, never removed
    without --discard (its commits and files cannot be judged). With no state there is
    no recorded host: the host the writer is placed on is asked whether it keeps one,
    once the writer has a directory here (a plan for a new writer connects nowhere;
    under its lease, whose file makes the directory, the host is asked)."""
    if state is not None or not ctx.paths.writer_dir(name).is_dir():
        return False
    host = ctx.host_of(name, placed)
    return host.storage_present(writer_at(ctx.paths, name, host.name), "clone")


def report_stateless(ctx: PoolContext, name: str) -> None:
    ctx.report.add(
        "writer_state_missing",
        "error",
        _target(ctx.alias, name),
        "the writer has a clone but no usable state.json; mode set neither re-provisions "
        "nor removes it",
        remedy=f"copy what you need out of the clone, then `writerpool writer remove {name} "
        "--discard --apply` and run mode set again",
    )


def provision_one(ctx: PoolContext, index: int) -> None:
    name = writer_name(ctx.alias, index)
    assert ctx.base is not None
    repo = ctx.loaded.config.workspaces[ctx.alias]
    placed = host_for(index, ctx.settings.placed_on())
    try:
        host = ctx.host_of(name, placed)
        with operate(ctx.paths, host, ctx.loaded.config.pool.lease_wait_seconds, name, ctx.leases):
            # Checked under the lease: the plan saw the same, but nothing may slip between.
            if stateless_clone(ctx, name, load_state(ctx.paths.writer_dir(name)), placed):
                report_stateless(ctx, name)
                return
            ctx.step(f"{name}: cloning {ctx.base.name} from a bundle and verifying the clone")
            state = provision(ctx.paths, host, ctx.alias, name, repo, ctx.settings, ctx.base,
                              ctx.report, ctx.loaded.config.pool)  # fmt: skip
            render_writer_agent_dir(ctx.paths, host, ctx.loaded.config, state)
            ctx.step(f"{name}: running the acceptance harness in the writer's container")
            _, finding = accept(ctx.paths, host, state, ctx.loaded.config)
            ctx.report.findings.append(finding)
    except WriterpoolError as exc:
        _record_failure(ctx, name, exc)
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        _record_failure(ctx, name, failure("disk_full", "provisioning stopped", exc))


def render_writer_agent_dir(
    paths: Paths, host: WriterHost, config: Config, state: WriterState
) -> None:
    """The writer's agent directory for its first profile, written on its host; each
    session renders it again for its own profile's provider."""
    profile = config.profiles[state.profiles[0]]
    with host.agent_dir(writer_of(paths, state)) as agent_dir:
        backend_for(profile.agent).render(config, agent_dir, profile.provider, True)


def accept_kept(ctx: PoolContext, index: int) -> None:
    """Re-run acceptance for a kept writer whose readiness is not current."""
    name = writer_name(ctx.alias, index)
    target = _target(ctx.alias, name)
    state = load_state(ctx.paths.writer_dir(name))
    if state is None:
        return
    pool = ctx.loaded.config.pool
    try:
        host = ctx.host_of(name)
    except WriterpoolError as exc:
        _record_failure(ctx, name, exc)
        return
    # Under the new profiles: a change of the agents they use makes acceptance stale.
    adopted = state.model_copy(update={"profiles": ctx.settings.profiles})
    phase, _ = readiness(ctx.paths, host, adopted, ctx.loaded.config)
    if phase == "ready":
        if (state.profiles, state.lifecycle) == (ctx.settings.profiles, ctx.settings.lifecycle):
            ctx.report.add("writer_unchanged", "ok", target, "ready and current")
            return
        try:
            with operate(ctx.paths, host, pool.lease_wait_seconds, name, ctx.leases):
                state = _adopt_free_settings(ctx, load_state(ctx.paths.writer_dir(name)) or state)
        except WriterpoolError as exc:
            _record_failure(ctx, name, exc)
            return
        ctx.report.add("writer_settings_adopted", "ok", target,
                       f"now lifecycle {state.lifecycle}, profiles "
                       f"{','.join(state.profiles)}; ready")  # fmt: skip
        return
    try:
        with operate(ctx.paths, host, pool.lease_wait_seconds, name, ctx.leases):
            state = load_state(ctx.paths.writer_dir(name)) or state
            state = _adopt_free_settings(ctx, state)
            ctx.step(f"{name}: re-running acceptance (its fingerprint is not current)")
            _, finding = accept(ctx.paths, host, state, ctx.loaded.config)
            ctx.report.findings.append(finding)
    except WriterpoolError as exc:
        _record_failure(ctx, name, exc)


def _adopt_free_settings(ctx: PoolContext, state: WriterState) -> WriterState:
    # Profiles and lifecycle do not touch the clone or the container: take the new ones.
    update = {"profiles": ctx.settings.profiles, "lifecycle": ctx.settings.lifecycle}
    return save_state(ctx.paths.writer_dir(state.name), state.model_copy(update=update))


def mark_settings_changed(ctx: PoolContext, index: int) -> None:
    name = writer_name(ctx.alias, index)
    state = load_state(ctx.paths.writer_dir(name))
    if state is not None and state.reason != "writer_settings_changed":
        save_state(
            ctx.paths.writer_dir(name),
            state.model_copy(update={"phase": "not_ready", "reason": "writer_settings_changed"}),
        )


def remove_surplus(ctx: PoolContext, index: int) -> None:
    name = writer_name(ctx.alias, index)
    try:
        host = ctx.host_of(name)
        with operate(ctx.paths, host, ctx.loaded.config.pool.lease_wait_seconds, name, ctx.leases):
            # Checked again under the lease: a session may have added work since the plan.
            state = load_state(ctx.paths.writer_dir(name))
            if not ctx.discard and (
                stateless_clone(ctx, name, state)
                or (
                    state is not None
                    and has_uncollected_work(ctx.paths, host, state, ctx.loaded.config.pool)
                )
            ):
                ctx.report.add(
                    "writer_uncollected",
                    "error",
                    _target(ctx.alias, name),
                    "surplus writer holds uncollected work; collect it or pass --discard",
                )
                return
            delete_writer_files(ctx.paths, host, name)
        ctx.report.add("writer_removed", "ok", _target(ctx.alias, name), "surplus writer removed")
    except WriterpoolError as exc:
        _record_failure(ctx, name, exc)


def delete_writer_files(paths: Paths, host: WriterHost, name: str) -> None:
    """Remove everything a writer owns except its lease file (still held by the caller):
    its storage on its host, then the rest of its record.

    Any tree the agent made goes (no recursion; see clonetool/removal.py). The state
    file goes last: killed or failing part way, the writer is still listed, its work
    still guarded, and the same command finishes the removal. The lease file left
    behind does not make a writer: see provision.existing_states.
    """
    host.remove_storage(writer_at(paths, name, host.name))
    record = paths.writer_record(name)
    keep = (record.lease_file.name, record.state_file.name)
    for child in sorted(os.listdir(record.path)):
        if child not in keep:
            remove_path(record.path / child)
    record.state_file.unlink(missing_ok=True)
