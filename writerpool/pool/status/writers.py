"""`writer status` and `writer list`: per writer, what a session would get, and what to run.

The verdict is the session guard's (pool/claims/admission.py); this module only adds who holds
a busy lease, what work the clone holds, and the next command for each reason.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.network import classification, describe
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.gitops.limits import LIMITS
from writerpool.pool.acceptance.control import control_command
from writerpool.pool.claims.admission import LEASABLE, REASONS, Admission, admit
from writerpool.pool.claims.refresh import Refresh, behind_by, checkout_of, plan_refresh
from writerpool.pool.modes.show import reproduce_for
from writerpool.pool.provision.listing import unknown_writer, writer_names
from writerpool.pool.writer.inspect import VIEW, Inspection
from writerpool.pool.writer.lease import lease_taken, read_holder
from writerpool.pool.writer.verdicts import Verdict, lease_count, remember
from writerpool.pool.writer.work import changed_branches
from writerpool.report import Report, sanitize
from writerpool.runtime.host import WriterHost
from writerpool.runtime.hosts import WriterHosts
from writerpool.state.writer import WriterState, load_state


@dataclass(frozen=True)
class WriterStatus:
    name: str
    workspace: str
    phase: str
    base: str
    workspace_base: str | None
    lifecycle: str
    network: str
    code: str  # writer_leasable or why not
    reason: str  # in words
    readiness: str | None = None  # readiness's reason code (None: ready, or not known)
    next: str | None = None
    holder: dict[str, Any] | None = None
    work: dict[str, Any] | None = None
    problems: tuple[str, ...] = field(default=())
    # Why the clone was not judged (None: it was): atBaseline is then null, never a guess.
    unseen: str | None = None
    behind: int | None = None  # commits the base branch gained (None: not known)
    refresh: Refresh | None = None  # what the lease does first, when it does anything
    host: str = "local"  # its host's name (never its address)
    allowlist: bool = False  # the workspace has an egress allowlist (limited-allowlist)
    agents: tuple[str, ...] = ()  # the agents its profiles run (config/models.py Profile.agent)

    @property
    def leasable(self) -> bool:
        return self.code == LEASABLE

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "workspace": self.workspace, "host": self.host,
            "phase": self.phase,
            "base": self.base, "workspaceBase": self.workspace_base,
            "lifecycle": self.lifecycle, "network": self.network,
            "networkClass": classification(self.network, self.allowlist),
            "leasable": self.leasable, "state": self.code, "reason": self.readiness,
            "why": sanitize(self.reason),
            "next": self.next, "heldBy": self.holder, "work": self.work,
            "atBaseline": None if self.unseen is not None else not self.problems,
            "atBaselineUnknown": self.unseen,
            "warm": self.code == "writer_warm",
            "notAtBaseline": [sanitize(p) for p in self.problems],
            "behind": self.behind,
            "atLease": self.refresh.to_json() if self.refresh else None,
            "agents": list(self.agents),
        }  # fmt: skip

    def text(self) -> str:
        network = f"network {describe(self.network)}, host {self.host}"
        if self.agents:
            network += f", agents {','.join(self.agents)}"
        behind = f"; behind {self.base} by {self.behind}" if self.behind else ""
        if self.leasable:
            line = f"leasable: phase {self.phase}, base {self.base}, {self.lifecycle}, {network}"
            if self.workspace_base and self.base != self.workspace_base:
                line = f"leasable for sessions on base {self.base}: {self.next}; "
                line += f"phase {self.phase}, {self.lifecycle}, {network}"
            line += behind
            return line + (f"; {self.refresh.text()}" if self.refresh else "")
        line = f"not leasable: {self.reason}; phase {self.phase}, base {self.base}, {network}"
        if self.work:
            line += "; " + work_text(self.work)
        return line + behind


def session_on(workspace: str, base: str) -> str:
    """The tool call that starts a coding session on `base` (the words a client types)."""
    return f"pi_session_start {json.dumps({'workspace': workspace, 'base': base})}"


def fix_round_next(workspace: str, name: str, base: str, workspace_base: str) -> str:
    """What serves a fix round (a writer reset onto another base than the workspace's):
    a session on its base gets it; once the round is over, finish ends it."""
    return (
        f"{session_on(workspace, base)} gets it; when the {base} round is over, "
        f"writerpool writer finish {name} --apply collects its work and returns it to "
        f"{workspace_base}, the workspace's base"
    )


def work_summary(inspection: Inspection, state: WriterState) -> dict[str, Any] | None:
    """What the clone holds beyond its baseline: changed branches, WIP, stash, collection."""
    if state.baseline is None:
        return None
    changed = changed_branches(inspection, state.baseline)
    named = sorted(changed.items())[: LIMITS.listed]
    out: dict[str, Any] = {
        "changedBranches": {sanitize(shown_name(k)): v for k, v in named},
        "changedBranchCount": len(changed),
        "uncommitted": inspection.dirty,
        "stash": inspection.stash,
        "unexported": inspection.unexported_count,
        "leftovers": {k: n for k, n in inspection.counts.items() if k in LEFTOVER_KINDS},
    }
    if state.collection is not None:
        out["collection"] = {"at": state.collection.at, "complete": state.collection.complete}
    return out


LEFTOVER_KINDS = ("ignored", "special", "directory")
# Writers `writer status` inspects at once (each inspection is one throwaway container).
PARALLEL = 4


def shown_name(name: str) -> str:
    """A branch name safe for a terminal: non-printable characters escaped."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)[:200]


def work_text(work: dict[str, Any]) -> str:
    parts = []
    if work["changedBranches"]:
        more = work["changedBranchCount"] - len(work["changedBranches"])
        parts.append("branches " + ", ".join(work["changedBranches"])
                     + (f" and {more} more" if more > 0 else ""))  # fmt: skip
    if work["uncommitted"]:
        parts.append("uncommitted changes")
    if work["stash"]:
        parts.append("a stash")
    if work["unexported"]:
        parts.append(f"{work['unexported']} path(s) collection cannot carry")
    if "collection" in work:
        done = "complete" if work["collection"]["complete"] else "incomplete"
        parts.append(f"last collection {work['collection']['at']} ({done})")
    return "holds " + "; ".join(parts) if parts else "holds no work"


def next_command(paths: Paths, state: WriterState, code: str, wbase: str | None) -> str | None:
    name = state.name
    mode_set = reproduce_for(paths, state.alias) or f"writerpool mode set {state.alias} ..."
    commands = {
        "writer_holds_work": f"writerpool writer diff {name} --stat (review), then "
        f"writerpool writer finish {name} --apply",
        "writer_collected_unfinished": f"writerpool writer finish {name} --apply",
        "writer_not_at_baseline": f"writerpool writer reset {name} --apply",
        "writer_settings_changed": f"{mode_set} --apply (replaces it when it holds nothing; "
        f"with work, writerpool writer finish {name} --apply first)",
        "isolation_control_required": control_command(state.host),
        # The clone could not be judged: see what reset would lose, then reset.
        "writer_inspect_failed": f"writerpool writer reset {name} --discard (shows what it "
        "would lose), then the same with --apply; writerpool doctor if every writer fails",
    }
    if code in (LEASABLE, "writer_busy", "writer_warm"):
        return None
    return commands.get(code, f"{mode_set} --apply (re-runs acceptance)")


def _busy(paths: Paths, name: str) -> dict[str, Any] | None:
    """Who holds the lease ({} when unnamed), or None when it is free; asked without
    taking the lease, so a session starting meanwhile is never turned away."""
    if not lease_taken(paths.writer_dir(name)):
        return None
    holder = read_holder(paths.writer_dir(name))
    if holder is None:
        return {}
    return {"pid": holder.pid, "command": holder.command, "warm": holder.warm}


def _busy_status(common: WriterStatus, holder: dict[str, Any]) -> WriterStatus:
    """writer_busy, or writer_warm when the holder is the pool service keeping it warm
    (at its baseline: it was admitted when warmed, and nothing has run in it since)."""
    who = f" (pid {holder['pid']}: {holder['command']})" if holder else ""
    code = "writer_warm" if holder.get("warm") else "writer_busy"
    # A warm writer was admitted when warmed and nothing has run in it since.
    unseen: str | None = "held by a session or command; its clone is not inspected meanwhile"
    if code == "writer_warm":
        unseen = None
    return replace(common, code=code, reason=REASONS[code] + who, holder=holder, unseen=unseen)


def profile_agents(loaded: LoadedConfig, names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The agents the writer's profiles run, each once, in the profiles' order."""
    profiles = loaded.config.profiles
    return tuple(dict.fromkeys(profiles[n].agent for n in names if n in profiles))


def status_of(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, state: WriterState
) -> WriterStatus:
    entry = load_modes(paths).workspaces.get(state.alias)
    wbase = entry.container.base if entry and entry.container else None
    common = WriterStatus(
        name=state.name, workspace=state.alias, phase=state.phase, base=state.base.name,
        workspace_base=wbase, lifecycle=state.lifecycle, network=state.network,
        host=state.host, code="", reason="",
        readiness=state.reason if state.phase != "ready" else None,
        allowlist=bool(entry and entry.container and entry.container.allow),
        agents=profile_agents(loaded, state.profiles),
    )  # fmt: skip
    wdir = paths.writer_dir(state.name)
    count = lease_count(wdir)  # before the lease test: any later lease makes it stale
    holder = _busy(paths, state.name)
    if holder is not None:
        return _busy_status(common, holder)
    unseen: str | None = None
    try:
        # A view: its container runs beside a session that starts meanwhile.
        verdict = admit(paths, host, loaded.config, state, full=True, role=VIEW)
    except WriterpoolError as exc:
        holder = _busy(paths, state.name)
        if holder is not None:  # a session took the writer while it was read
            return _busy_status(common, holder)
        why = f"the clone could not be inspected ({exc.code})"
        verdict = Admission(exc.code, why, phase=state.phase)
        unseen = why
    if verdict.inspection is None and unseen is None:
        unseen = "the clone was not inspected: the writer has no baseline yet"
    if verdict.inspection is not None and verdict.readiness is None:
        remember(wdir, count, Verdict(verdict.code, verdict.reason, verdict.problems))
    code, reason = verdict.code, verdict.reason
    refresh, behind = lease_refresh(loaded, state, verdict)
    if refresh is not None:
        code, reason = LEASABLE, "a session can have it"
    work = work_summary(verdict.inspection, state) if verdict.inspection else None
    following = next_command(paths, state, code, wbase)
    if code == LEASABLE and wbase and state.base.name != wbase:
        # A fix round: leasable for sessions that ask for its base; finish ends the round.
        following = fix_round_next(state.alias, state.name, state.base.name, wbase)
    if code == "writer_holds_work" and work and work["uncommitted"] and not work["changedBranches"]:
        # Only uncommitted edits: the plain diff compares branches and would show nothing.
        following = (
            f"writerpool writer diff {state.name} --wip --stat (review), then "
            f"writerpool writer finish {state.name} --apply"
        )
    if code == "writer_holds_work" and work and work["stash"]:
        following = (
            f"writerpool writer collect {state.name} --apply, then writerpool writer "
            f"reset {state.name} --apply --discard (a stash is never collected)"
        )
    return replace(
        common, code=code, reason=reason, next=following, phase=verdict.phase,
        readiness=verdict.readiness,
        work=work, problems=verdict.problems, behind=behind, unseen=unseen,
        refresh=refresh if refresh is not None and refresh.needed else None,
    )  # fmt: skip


def lease_refresh(
    loaded: LoadedConfig, state: WriterState, verdict: Admission
) -> tuple[Refresh | None, int | None]:
    """What the session guard would do before handing the writer over (None: it would
    refuse it, or nothing to do), and how far its base moved (None: unreadable)."""
    try:
        repo = checkout_of(loaded, state.alias)
        current = resolve_base(repo, state.base.name)
        plan = plan_refresh(repo, state, verdict, current)
        if plan is not None:
            return plan, plan.behind
    except WriterpoolError:
        return None, None
    return None, behind_by(repo, state.base.commit, current.commit)


def status_on(
    paths: Paths, hosts: WriterHosts, loaded: LoadedConfig, state: WriterState
) -> WriterStatus:
    """The writer's status, read on its host; a host that cannot be reached says so."""
    try:
        host = hosts.get(state.host)
    except WriterpoolError as exc:
        return WriterStatus(
            name=state.name, workspace=state.alias, phase=state.phase, base=state.base.name,
            workspace_base=None, lifecycle=state.lifecycle, network=state.network,
            host=state.host, code=exc.code, reason=f"its host cannot be reached ({exc.code})",
            unseen=f"the clone was not inspected: host {state.host} is not reachable",
        )  # fmt: skip
    return status_of(paths, host, loaded, state)


def writer_statuses(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, command: str, name: str | None
) -> Report:
    """`writer status [NAME]` (and `writer list`): one finding and one row per writer."""
    report = Report(command)
    known = writer_names(paths)
    if name is not None and name not in {n for _, n in known}:
        raise unknown_writer(paths, name)
    rows = []
    states = []
    for alias, each in known:
        if name is not None and each != name:
            continue
        target = f"writer/{alias}/{each}"
        try:
            state = load_state(paths.writer_dir(each))
        except WriterpoolError as exc:
            report.add(exc.code, "error", target, exc.message)
            continue
        if state is not None:  # a removed writer keeps only its lease file
            states.append((target, state))
    # Inspections run side by side, at most PARALLEL at once; rows keep the writers' order.
    # Each writer is judged on its own host, each host over SSH connected once.
    with WriterHosts(loaded.config.hosts, host) as hosts, ThreadPoolExecutor(PARALLEL) as workers:
        statuses = list(workers.map(lambda s: status_on(paths, hosts, loaded, s[1]), states))
    for (target, _state), status in zip(states, statuses, strict=True):
        rows.append(status.to_json())
        fine = status.leasable or status.code == "writer_warm"
        report.add(status.code, "ok" if fine else "warning", target, status.text(),
                   remedy=status.next or "")  # fmt: skip
    report.data["writers"] = rows
    report.data["warm"] = sum(1 for row in rows if row["warm"])
    warm_hosts = [str(row["host"]) for row in rows if row["warm"]]
    report.data["warmByHost"] = {h: warm_hosts.count(h) for h in sorted(set(warm_hosts))}
    return report
