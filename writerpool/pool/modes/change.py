"""`writerpool mode set`: plan by default, change only with apply."""

from __future__ import annotations

import os

from pydantic import ValidationError

from writerpool.config.models import Config, LoadedConfig, describe_validation
from writerpool.config.modes import (
    IMAGE_ID_RE,
    LOCAL_HOST,
    ContainerSettings,
    ModeEntry,
    host_for,
    load_modes,
    store_entry,
)
from writerpool.config.network import describe
from writerpool.config.paths import Paths
from writerpool.crash import crash_point
from writerpool.errors import UsageError, WriterpoolError
from writerpool.gitops.base import BaseRef, default_base_name, resolve_base, validate_base_name
from writerpool.pool.modes.gate import doctor_gate
from writerpool.pool.modes.plan import report_changes
from writerpool.pool.modes.rebase import move_to_base, plan_base_moves
from writerpool.pool.modes.replace import plan_replacement, replace_writer
from writerpool.pool.modes.request import (
    ModeRequest,
    check_allow,
    check_hosts,
    check_profiles,
    check_warm,
    report_derived,
)
from writerpool.pool.provision.make import existing_states, settings_digest, writer_name
from writerpool.pool.provision.reconcile import (
    PoolContext,
    accept_kept,
    provision_one,
    remove_surplus,
    report_stateless,
    stateless_clone,
)
from writerpool.pool.writer.lease import leased_all
from writerpool.pool.writer.work import has_uncollected_work
from writerpool.report import Report, Step, quiet
from writerpool.runtime.host import WriterHost
from writerpool.runtime.hosts import WriterHosts
from writerpool.runtime.podman import PodmanUnavailable
from writerpool.state.servers import count_alone
from writerpool.state.writer import WriterState


def rootless_podman_usable(host: WriterHost) -> bool:
    if os.geteuid() == 0:
        return False
    try:
        host.facts()
    except (PodmanUnavailable, WriterpoolError):
        return False
    return True


def choose_base(
    paths: Paths, repo_base: str | None, recorded: str | None, alias: str, repo: object
) -> str:
    if repo_base is not None:
        validate_base_name(repo_base)
        return repo_base
    if recorded is not None:
        return recorded
    bases = {s.base.name for s in existing_states(paths, alias).values() if s is not None}
    if len(bases) > 1:
        raise WriterpoolError(
            "workspace_base_ambiguous", "writers sit on different bases; give --base"
        )
    if bases:
        return bases.pop()
    return default_base_name(repo)  # type: ignore[arg-type]


def _entry(
    config: Config, req: ModeRequest, mode: str, base: str | None, report: Report
) -> ModeEntry:
    if req.allow:
        report_derived(report, req.alias, check_allow(config, req))
    check_hosts(config, req.hosts)
    if mode == "host":
        return ModeEntry(mode="host", accept_host_writes=True)
    if mode == "read-only":
        return ModeEntry(mode="read-only")
    try:
        settings = ContainerSettings(
            profiles=req.profiles,
            writers=req.writers,
            lifecycle=req.lifecycle,
            image=req.image,
            network=req.network,
            tags=req.tags,
            cache=req.cache,
            base=base or "",
            allow=req.allow or None,
            warm=req.warm,
            warm_hosts=dict(req.warm_hosts) if req.warm_hosts else None,
            hosts=req.hosts if req.hosts and req.hosts != (LOCAL_HOST,) else None,
        )
    except ValidationError as exc:
        raise UsageError(f"invalid container settings: {describe_validation(exc)}") from exc
    return ModeEntry(mode="container", container=settings)


def set_mode(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, req: ModeRequest, step: Step = quiet
) -> Report:
    # Each writer's steps run on its own host; a host over SSH is connected once.
    with WriterHosts(loaded.config.hosts, host) as hosts:
        return _set_mode(paths, hosts, loaded, req, step)


def _set_mode(
    paths: Paths, hosts: WriterHosts, loaded: LoadedConfig, req: ModeRequest, step: Step
) -> Report:
    host = hosts.get(LOCAL_HOST)
    config = loaded.config
    report = Report("mode set")
    target = f"modes/workspace/{req.alias}"
    mode = _chosen_mode(config, host, req, report, target)
    if mode is None:
        return report
    current = load_modes(paths).workspaces.get(req.alias)
    base: BaseRef | None = None
    if mode == "container":
        check_profiles(config, req.profiles)
        check_warm(config, req.profiles, req.warm)
        repo = config.workspaces[req.alias]
        recorded = current.container.base if current and current.container else None
        base = resolve_base(repo, choose_base(paths, req.base, recorded, req.alias, repo))
    entry = _entry(config, req, mode, base.name if base else None, report)
    if not req.apply:
        report_changes(report, req.alias, current, entry, apply=False)
    if current == entry:
        report.add("mode_unchanged", "ok", target, f"mode {mode} already stored")
    elif not req.apply:
        network = f", network {describe(req.network)}" if mode == "container" else ""
        report.add("mode_planned", "planned", target, f"would store mode {mode}{network}")
    ctx = None
    if entry.container is not None:
        ctx = PoolContext(
            paths=paths, host=host, loaded=loaded, alias=req.alias, settings=entry.container,
            base=base, report=report, apply=req.apply, discard=req.discard, step=step,
            hosts=hosts,
        )  # fmt: skip
        if not placement_supported(ctx) or not plan_writers(ctx):
            return report
        if not req.apply:
            plan_base_moves(ctx)
    if not req.apply:
        return report
    if ctx is not None and not doctor_gate(
        paths, report, target, workspace=req.alias, profiles=req.profiles, network=req.network
    ):
        return report
    if current != entry:
        _store(paths, req, current, entry, report)
    if ctx is not None:
        apply_writers(ctx)
    return report


def _chosen_mode(
    config: Config, host: WriterHost, req: ModeRequest, report: Report, target: str
) -> str | None:
    """The mode to store: the one asked, else container where rootless Podman is usable.
    None: refused with a finding in `report`."""
    if req.alias not in config.workspaces:
        raise UsageError(f"workspace {req.alias!r} is not configured", code="alias_unknown")
    if req.image != "default" and not IMAGE_ID_RE.fullmatch(req.image):
        raise UsageError("--image takes 'default' or a local image id of 64 lowercase hex digits")
    mode = req.mode
    if mode is None:
        if not rootless_podman_usable(host):
            report.add("mode_choice_required", "error", target,
                       "rootless Podman is not usable here; choose host or read-only explicitly",
                       remedy="writerpool mode set ALIAS read-only "
                       "(or host --accept-host-writes)")  # fmt: skip
            return None
        mode = "container"
    if mode != "container" and req.container_options_given:
        raise UsageError("container options apply to container mode only")
    if mode == "host" and not req.accept_host_writes:
        report.add("host_ack_required", "error", target, "host mode lets coding sessions "
                   "write the checkout; add --accept-host-writes")  # fmt: skip
        return None
    return mode


def _store(
    paths: Paths, req: ModeRequest, current: ModeEntry | None, entry: ModeEntry, report: Report
) -> None:
    target = f"modes/workspace/{req.alias}"
    crash_point("mode_set.storing")
    store_entry(paths, req.alias, entry)
    report_changes(report, req.alias, current, entry, apply=True)
    network = f", network {describe(req.network)}" if entry.mode == "container" else ""
    crash_point("mode_set.stored")
    report.add("mode_applied", "ok", target, f"mode {entry.mode} stored{network}")
    _restart_note(paths, report, target)


def _restart_note(paths: Paths, report: Report, target: str) -> None:
    """Warn only about servers that keep the modes they loaded: each `serve` running
    alone. The pool service and the `serve` relays to it pick the change up themselves."""
    alone = count_alone(paths)
    if alone:
        report.add(
            "controllers_restart_required",
            "warning",
            target,
            f"{alone} `writerpool serve` running alone keep the modes they loaded; "
            "restart their clients' servers to apply this",
            servers=alone,
        )


def apply_writers(ctx: PoolContext) -> None:
    """Reconcile and move every writer of the workspace (the wanted and the surplus),
    under leases taken with one wait for all of them, not one per writer."""
    indices = set(range(1, ctx.settings.writers + 1)) | set(existing_states(ctx.paths, ctx.alias))
    names = [writer_name(ctx.alias, index) for index in sorted(indices)]
    wait = ctx.loaded.config.pool.lease_wait_seconds
    with leased_all(ctx.paths.writer_dir, names, wait) as leases:
        ctx.leases = leases
        reconcile(ctx)
        move_to_base(ctx)


def plan_writers(ctx: PoolContext) -> bool:
    """Report what would happen to each writer; False when something must stop the apply."""
    ok = True
    digest = settings_digest(ctx.settings)
    states = existing_states(ctx.paths, ctx.alias)
    for index in range(1, ctx.settings.writers + 1):
        name = writer_name(ctx.alias, index)
        target = f"writer/{ctx.alias}/{name}"
        state = states.get(index)
        if stateless_clone(ctx, name, state, host_for(index, ctx.settings.placed_on())):
            report_stateless(ctx, name)
            ok = False
        elif state is None:
            if not ctx.apply:
                host = host_for(index, ctx.settings.placed_on())
                ctx.report.add("writer_planned", "planned", target,
                               f"would be provisioned on host {host}", host=host)  # fmt: skip
        elif state.settings_digest != digest:
            ok = plan_replacement(ctx, state) and ok
        elif not ctx.apply:
            _report_kept_writer(ctx, state)
    for index, state in states.items():
        if index <= ctx.settings.writers:
            continue
        target = f"writer/{ctx.alias}/{writer_name(ctx.alias, index)}"
        if not ctx.discard and stateless_clone(ctx, writer_name(ctx.alias, index), state):
            report_stateless(ctx, writer_name(ctx.alias, index))
            ok = False
        elif state is not None and not ctx.discard and _uncollected(ctx, state):
            ctx.report.add(
                "writer_uncollected",
                "error",
                target,
                "surplus writer holds uncollected work; collect it or pass --discard",
            )
            ok = False
        elif not ctx.apply:
            ctx.report.add(
                "writer_remove_planned", "planned", target, "surplus writer would be removed"
            )
    return ok


def placement_supported(ctx: PoolContext) -> bool:
    """Settings a host the writers are placed on cannot give (on a host over SSH, those
    that need the key or a CA there) are refused before anything is stored or
    provisioned; each host's kind says which, with no connection made."""
    placed = sorted({host_for(i, ctx.settings.placed_on())
                     for i in range(1, ctx.settings.writers + 1)})  # fmt: skip
    for name in placed:  # bounded by the configured hosts
        try:
            if ctx.hosts is None:
                ctx.host.check_network(ctx.settings.network, ctx.settings.allow)
            else:
                ctx.hosts.check_network(name, ctx.settings.network, ctx.settings.allow)
        except WriterpoolError as exc:
            ctx.report.add("writer_host_unsupported", "error", f"modes/workspace/{ctx.alias}",
                           f"writers on {name}: {exc.message}; nothing changed",
                           remedy="use --network provider or none without --allow, or place "
                           "the writers on local (--hosts local)")  # fmt: skip
            return False
    return True


def _report_kept_writer(ctx: PoolContext, state: WriterState) -> None:
    """A kept writer's plan: the settings it takes without a rebuild, or none."""
    target = f"writer/{ctx.alias}/{state.name}"
    free = {"lifecycle": (state.lifecycle, ctx.settings.lifecycle),
            "profiles": (",".join(state.profiles), ",".join(ctx.settings.profiles))}  # fmt: skip
    changed = [f"{k} {old} → {new}" for k, (old, new) in free.items() if old != new]
    if changed:
        ctx.report.add("writer_settings_adopted", "planned", target,
                       f"would take {'; '.join(changed)} (no rebuild needed)")  # fmt: skip
    else:
        ctx.report.add("writer_unchanged", "ok", target, "settings match")


def _uncollected(ctx: PoolContext, state: WriterState) -> bool:
    # Fail closed: work that cannot be inspected counts as uncollected.
    try:
        return has_uncollected_work(ctx.paths, ctx.host_of(state.name), state,
                                    ctx.loaded.config.pool)  # fmt: skip
    except WriterpoolError:
        return True


def reconcile(ctx: PoolContext) -> None:
    digest = settings_digest(ctx.settings)
    states = existing_states(ctx.paths, ctx.alias)
    for index in range(1, ctx.settings.writers + 1):
        state = states.get(index)
        if state is None or state.phase == "provisioning":
            provision_one(ctx, index)
        elif state.settings_digest == digest:
            accept_kept(ctx, index)
        else:
            replace_writer(ctx, index)
    for index in sorted(states):
        if index > ctx.settings.writers:
            remove_surplus(ctx, index)
