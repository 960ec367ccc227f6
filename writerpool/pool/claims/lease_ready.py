"""Leasing a ready writer to a coding session."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from writerpool.agent import launch as agent_launch
from writerpool.agent.seam import AgentBackend
from writerpool.audit import audit
from writerpool.config.models import Config, LoadedConfig, Pool, Profile
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths, WriterRecord
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import BaseRef, resolve_base
from writerpool.pool.claims.admission import admit, clone_verdict
from writerpool.pool.claims.choose import candidates
from writerpool.pool.claims.refresh import Refresh, apply_refresh, checkout_of, plan_refresh
from writerpool.pool.writer.container import AGENT_DIR, session_spec, writer_of
from writerpool.pool.writer.fence import fence, refuse_others, writer_containers
from writerpool.pool.writer.inspect import Inspection, inspect_writer
from writerpool.pool.writer.lease import Lease
from writerpool.pool.writer.verdicts import (
    Verdict,
    advance,
    current,
    lease_count,
    mark_changed,
    remember,
)
from writerpool.report import sanitize
from writerpool.runtime.host import Writer, WriterHost
from writerpool.runtime.hosts import WriterHosts, open_host
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import WriterState, load_state

log = logging.getLogger(__name__)


@dataclass
class WriterSlot:
    """A writer leased to one session; the lease is held until release()."""

    name: str
    base_ref: str
    base_commit: str
    writer: Writer  # its record here; its storage through `host`
    network: str  # the writer's network kind
    allow: tuple[str, ...] | None  # the workspace's allowlist words, when it has one
    spec: ContainerSpec  # the session's container, as it runs on `host`
    host: WriterHost
    lease: Lease
    refused: list[str] = field(default_factory=list)
    prepared: str = ""  # what the lease did first (leftovers removed, base followed)
    state: WriterState | None = None
    paths: Paths | None = None
    pool: Pool | None = None
    # Set by the one caller that ends the slot (_end), under its lock.
    _ended: bool = field(default=False, init=False, repr=False)
    _ending: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def agent_command(
        self, backend: AgentBackend, profile: Profile
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run the profile's agent in the session's
        container on the writer's host, its agent directory as rendered through the host:
        the one start of a cold session and of a warm writer (`backend.start(argv, env,
        None, ready_seconds)`; a warm writer's is rendered without a credential first)."""
        command = backend.container_command(
            profile, False, AGENT_DIR, agent_launch.CONTAINER_SESSION_DIR
        )
        # Podman needs the account's real home (its storage), whatever HOME says.
        return self.host.attach_argv(self.spec, command), self.host.attach_env()

    def look(self, role: str = "inspect") -> Inspection | str:
        """The clone as a throwaway container on the writer's host sees it (its refs and
        whether it holds uncommitted or untracked changes, judged by content) while the
        lease is held: between turns, as a read-only VIEW beside pi (close() looks at the
        end). Else the code saying why it cannot be told (never raised)."""
        if self.state is None or self.paths is None or self.pool is None or self._ended:
            return "writer_not_leased"
        if not self.lease.held:
            return "writer_not_leased"
        try:
            return inspect_writer(self.paths, self.host, self.state, self.pool, role)
        except WriterpoolError as exc:
            log.info("writer %s not inspected: %s", self.name, exc.code)
            return _unseen(exc)

    def _end(self) -> bool:
        """Whether this caller ends the slot: the first of close() (a session's stop) and
        release() (an undo, the warm pool, or a session's host watch, on another
        thread) does; every later call returns at once, so none removes the
        writer's containers or frees its lease after another session may have taken it."""
        with self._ending:
            if self._ended or not self.lease.held:
                return False
            self._ended = True
            return True

    def release(self) -> None:
        """Stop the session's container (if still there) and free the lease."""
        if not self._end():
            return
        try:
            self._removed()
        finally:
            self.lease.release()

    def close(self) -> Inspection | str:
        """At a session's end, pi stopped: remove its container, inspect the clone once
        and keep the guard's verdict on it, then free the lease. Nothing can change the
        clone between this inspection and the next lease, so the next start takes the
        verdict instead of inspecting again (the inspection is off its critical path).
        Returns the clone as that inspection saw it (the session's final work view), or
        the code saying why it was not inspected."""
        if not self._end():
            return "writer_not_leased"
        try:
            return self._removed() or self._judge()
        finally:
            self.lease.release()

    def _judge(self) -> Inspection | str:
        if self.state is None or self.paths is None or self.pool is None:
            return "writer_not_leased"
        if self.state.baseline is None:
            return "writer_state_invalid"
        wdir = self.lease.path.parent
        count = lease_count(wdir)  # stable: the lease is held
        try:
            inspection = inspect_writer(self.paths, self.host, self.state, self.pool)
        except WriterpoolError as exc:
            log.info("writer %s not inspected at close: %s", self.name, exc.code)
            if exc.code != "writer_host_unreachable":
                # The next start's inspection would fail alike (a work tree over the
                # read limits, say): starts try this writer last until it is leased again.
                mark_changed(wdir)
            return _unseen(exc)
        remember(wdir, count, clone_verdict(self.paths, self.state, self.pool, inspection))
        return inspection

    def _removed(self) -> str | None:
        """Remove the session's containers; writer_host_unreachable when its host is gone
        (what is left there goes at the next fenced command on that host)."""
        try:
            own, others = writer_containers(self.host, self.writer)
            for container in own:  # one, or none
                self.host.remove(container.id)
            refuse_others(others, self.writer)  # its own are gone all the same
        except WriterpoolError as exc:
            if exc.code != "writer_host_unreachable":
                raise
            log.info("writer %s: its host is unreachable; its containers stay", self.name)
            return exc.code
        return None


def _unseen(exc: WriterpoolError) -> str:
    """Why the clone was not seen, as the work view names it (a clone over the read
    limits, gitops/limits.py, is told apart)."""
    return "clone_over_cap" if "over cap" in exc.message else exc.code


def _admit(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, state: WriterState, base: BaseRef
) -> tuple[WriterState, str | None, str]:
    """Why the writer cannot take a session now (None: it can), after the lease removed
    its leftovers and brought it to `base`'s commit now (pool/claims/refresh.py), with
    what it did in words. The lease is held and the fence proven. The log keeps each
    reason the clone is not at its baseline; the client gets the words."""
    wdir = paths.writer_dir(state.name)
    count = lease_count(wdir)  # stable: the lease is held
    # A current verdict stands in for the inspection (pool/writer/verdicts.py).
    verdict = admit(paths, host, loaded.config, state, known=current(wdir))
    plan = plan_refresh(checkout_of(loaded, state.alias), state, verdict, base)
    done = ""
    if plan is not None and plan.needed:
        if plan.leftovers:
            log.info("writer %s: %s", state.name, "; ".join(plan.leftovers)[:500])
        state = apply_refresh(paths, host, loaded, state, plan)
        done = plan.text().removeprefix("at lease: ")
        _audit_refresh(paths, state.name, plan)
        verdict = admit(paths, host, loaded.config, state)
    if verdict.readiness is None:  # the clone as it is now, whatever the refresh did
        remember(wdir, count, Verdict(verdict.code, verdict.reason, verdict.problems))
    if verdict.leasable:
        return state, None, done
    if verdict.problems:
        log.info("writer %s: %s", state.name, "; ".join(verdict.problems)[:500])
    return state, f"{verdict.reason} ({verdict.code})", done


def _audit_refresh(paths: Paths, name: str, plan: Refresh) -> None:
    """One audit line per thing the lease did (leftovers removed, base followed)."""
    outcomes = (["writer_leftovers_removed"] if plan.leftovers else []) + (
        ["writer_base_followed"] if plan.moved else []
    )
    for outcome in outcomes:
        try:
            audit(paths, tool_or_command="lease", outcome=outcome, writer=name)
        except OSError as exc:
            log.warning("audit line not written: %s", exc.strerror)


def _unavailable(wanted: str, refusals: list[str]) -> WriterpoolError:
    """writer_unavailable naming each writer's reason (codes and short words, no paths)."""
    detail = "; ".join(refusals) or "none is provisioned"
    return WriterpoolError(
        "writer_unavailable",
        sanitize(f"no free ready writer on base {wanted}: {detail}")[:900]
        + "; `writerpool writer status` says what to run",
    )


def _slot(
    paths: Paths,
    host: WriterHost,
    config: Config,
    state: WriterState,
    lease: Lease,
    done: str,
    allow: tuple[str, ...] | None,
) -> WriterSlot:
    return WriterSlot(
        name=state.name,
        base_ref=state.base.name,
        base_commit=state.base.commit,
        writer=writer_of(paths, state),
        network=state.network,
        allow=allow,
        spec=session_spec(paths, host, state, config.pool),
        host=host,
        lease=lease,
        prepared=done,
        state=state,
        paths=paths,
        pool=config.pool,
    )


def _try_writer(
    paths: Paths,
    hosts: WriterHosts,
    loaded: LoadedConfig,
    name: str,
    wanted: BaseRef,
    allow: tuple[str, ...] | None,
    warming: bool = False,
    on_host: str | None = None,
) -> WriterSlot | str | None:
    """The writer leased, or why not (None: it does not exist, or is not on `on_host`
    when that is given). `warming`: for the warm
    pool, whose idle pi changes nothing, so the verdict that admitted the writer stays
    current until the claim (which advances the count) or the writer's retirement."""
    wdir = paths.writer_dir(name)
    if not WriterRecord(wdir).state_file.exists():
        return None
    lease = Lease(wdir)
    try:
        lease.acquire(wait=0, judging=True)  # advanced below if a session takes it
    except WriterpoolError as exc:
        return f"{name} {exc.code}"  # busy with a session or a command
    try:
        state = load_state(wdir)
        if state is None or state.base.name != wanted.name or on_host not in (None, state.host):
            lease.release()
            if state is None or state.base.name == wanted.name:
                return None
            return f"{name} is on base {state.base.name}"
        host = hosts.get(state.host)  # over SSH: connected here, kept by the caller's set
        fence(host, writer_of(paths, state), lease)
        state, refusal, done = _admit(paths, host, loaded, state, wanted)
        if refusal is not None:
            log.info("writer %s not leased: %s", name, refusal)
            lease.release()
            return f"{name} {refusal}"
        if not warming:
            advance(wdir)  # the session will change the clone
        return _slot(paths, host, loaded.config, state, lease, done, allow)
    except WriterpoolError as exc:
        log.info("writer %s not leased: %s", name, exc.code)
        lease.release()
        return f"{name} {exc.code}"
    except BaseException:
        lease.release()
        raise


def lease_ready_writer(
    paths: Paths,
    loaded: LoadedConfig,
    alias: str,
    base: str | None,
    host: WriterHost | None = None,
    hosts: WriterHosts | None = None,
    warming: bool = False,
    on_host: str | None = None,
) -> WriterSlot:
    """Lease the first writer of `alias` on `base` (default: the workspace's) that can
    take a session, refreshed first, in the order pool/claims/choose.py gives. Bounded by the
    workspace's writer count. Each writer is judged on its own host: one in `hosts`
    (connected there and kept open by the caller for the session), or, without them,
    only writers on `host` (default: this machine). `on_host`: only writers on that host
    (the warm pool's per-host counts)."""
    if hosts is None:
        hosts = WriterHosts({}, host or open_host())
    entry = load_modes(paths).workspaces.get(alias)
    if entry is None or entry.container is None:
        raise WriterpoolError("writer_unavailable", "the workspace has no writers")
    # A base the checkout lacks is the caller's mistake, not a shortage of writers; the
    # commit it resolves to now is the one each writer is refreshed to.
    wanted = resolve_base(checkout_of(loaded, alias), base or entry.container.base)
    refusals: list[str] = []
    for name in candidates(paths, alias, entry.container.writers, refusals):
        got = _try_writer(
            paths, hosts, loaded, name, wanted, entry.container.allow, warming, on_host
        )
        if isinstance(got, WriterSlot):
            return got
        if got is not None:
            refusals.append(got)
    raise _unavailable(wanted.name, refusals)
