"""Starting and stopping a session's agent: the profile's agent (agent/seam.py) in a
leased writer (coding) or in a throwaway read-only container (read-only), or pi on the
host (host mode, which runs no other agent: sessions/placement.py refuses them)."""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from writerpool.agent import launch as agent_launch
from writerpool.agent.backends import backend_for
from writerpool.agent.egress import EgressRequest, Grant, grant
from writerpool.agent.environment import HOST, pi_env
from writerpool.agent.install import install_pi
from writerpool.agent.pi_backend import PI
from writerpool.audit import connect_auditor, egress_auditor
from writerpool.config.models import LoadedConfig
from writerpool.config.network import network_info
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.container import EGRESS_PORT
from writerpool.pool.writer.sweep import sweep_writer_credentials
from writerpool.sessions.placement import SessionPlan
from writerpool.sessions.scratch import ScratchRoot, sweep
from writerpool.sessions.turns import Snapshot
from writerpool.sessions.watch import HostWatch, WatchedAgent, lost

if TYPE_CHECKING:
    from writerpool.egress.supervisor import EgressSupervisor
    from writerpool.pool.claims.lease_ready import WriterSlot
    from writerpool.pool.claims.readonly import ReadonlyContainer
    from writerpool.pool.claims.warm import WarmPool, WarmWriter
    from writerpool.pool.writer.inspect import Inspection
    from writerpool.runtime.hosts import WriterHosts

log = logging.getLogger(__name__)

HOST_READY_SECONDS = 30.0
# A warm pi answers switch_session, set_model and set_thinking_level in milliseconds.
CLAIM_SECONDS = 10.0
# A container adds Podman's start to pi's own (about a second each on this kind of host).
CONTAINER_READY_SECONDS = 90.0
# Where the writer's private agent directory is mounted inside its container.
CONTAINER_AGENT_DIR = Path("/pi/agent")
CONTAINER_SESSION_DIR = agent_launch.CONTAINER_SESSION_DIR


class Agent(Protocol):
    """What a session uses of its running agent (agent/seam.py RunningAgent, or the same
    watched: sessions/watch.py)."""

    @property
    def alive(self) -> bool: ...
    def prompt(self, message: str) -> str: ...
    def abort(self) -> None: ...
    def turn(self, turn_id: str) -> Snapshot: ...
    def wait(self, turn_id: str, timeout: float) -> Snapshot: ...
    def watch(self, turn_id: str, wake: Callable[[], None]) -> Callable[[], None]: ...
    def close(self, timeout: float) -> None: ...


@dataclass
class Launched:
    agent: Agent
    grant: Grant  # the session's egress: ended at close
    scratch: Path | None = None  # the session's private directory, removed at close
    slot: WriterSlot | None = None
    # A writer session's clone as seen at close (pool/claims/lease_ready.py WriterSlot.look).
    seen: Inspection | str | None = None
    container: ReadonlyContainer | None = None  # a read-only session's
    warm: bool = False  # the session claimed a writer the pool service kept warm
    # A writer's session: its host's egress endpoint and watch, closed after the writer.
    seat: contextlib.ExitStack | None = None

    @property
    def writer(self) -> str | None:
        return self.slot.name if self.slot is not None else None

    @property
    def base(self) -> dict[str, str] | None:
        if self.slot is None:
            return None
        return {"ref": self.slot.base_ref, "commit": self.slot.base_commit}


class Launcher:
    def __init__(self, paths: Paths, loaded: LoadedConfig, warm: WarmPool | None = None) -> None:
        self._paths = paths
        self._loaded = loaded
        self._warm = warm  # the pool service's warm writers, claimed before a cold start
        if warm is not None:
            warm.start_egress_with(lambda: self._egress_host().start_ahead())
        self._config = loaded.config
        self._pi: Path | None = None
        self._scratch: ScratchRoot | None = None
        self._egress: EgressSupervisor | None = None
        # Hosts over SSH, connected once for all sessions (facts and image asked once);
        # those of a configuration reloaded away are closed at shutdown.
        self._hosts: WriterHosts | None = None
        self._retired: list[WriterHosts] = []
        self._lock = threading.Lock()
        # Credentials and proxy sockets left by a server that was killed go now, not
        # at the next session.
        try:
            sweep(paths.state_dir / "sessions", keep="")
        except OSError as exc:
            log.warning("stale session directories not swept: %s", exc.strerror)
        try:
            sweep_writer_credentials(paths)
        except OSError as exc:
            log.warning("stale writer credentials not swept: %s", exc.strerror)

    def reload(self, loaded: LoadedConfig) -> None:
        with self._lock:
            if self._hosts is not None and loaded.config.hosts != self._config.hosts:
                # Sessions on them go on; the next ones connect as configured now.
                self._retired, self._hosts = [*self._retired, self._hosts], None
            self._loaded, self._config = loaded, loaded.config

    def launch(self, plan: SessionPlan, session_id: str) -> Launched:
        if plan.placement == "container":
            return self._launch_writer(plan, session_id)
        if plan.placement == "readonly_container":
            return self._launch_readonly(plan, session_id)
        return self._launch_host(plan, session_id)

    def stop(self, launched: Launched, timeout: float) -> None:
        """Stop pi (and so its container), end its egress, release the writer.
        Every step runs even when an earlier one fails."""
        try:
            launched.agent.close(timeout)
        finally:
            try:
                launched.grant.revoke()
            finally:
                try:
                    if launched.slot is not None:
                        launched.seen = launched.slot.close()
                        if self._warm is not None:
                            self._warm.wake()  # the writer may be warmed again now
                    if launched.container is not None:
                        launched.container.remove()
                finally:
                    try:
                        if launched.seat is not None:
                            launched.seat.close()
                    finally:
                        if launched.scratch is not None:
                            shutil.rmtree(launched.scratch, ignore_errors=True)

    def shutdown(self) -> None:
        with self._lock:
            held, self._retired, self._hosts = [*self._retired, self._hosts], [], None
            for hosts in filter(None, held):  # bounded by the reloads that changed [hosts]
                hosts.close()
            if self._egress is not None:
                self._egress.close()
                self._egress = None
            if self._scratch is not None:
                self._scratch.close()
                self._scratch = None

    def _egress_host(self) -> EgressSupervisor:
        with self._lock:
            if self._egress is None:
                # Made on first use: a server without contained sessions starts no egress process.
                from writerpool.egress.supervisor import EgressSupervisor  # noqa: PLC0415

                self._egress = EgressSupervisor(audit=egress_auditor(self._paths),
                                          connect_audit=connect_auditor(self._paths))  # fmt: skip
            return self._egress

    def _host_set(self) -> WriterHosts:
        from writerpool.runtime.hosts import WriterHosts  # noqa: PLC0415 - see _lease_cold

        with self._lock:
            if self._hosts is None:
                self._hosts = WriterHosts(self._config.hosts)
            return self._hosts

    def _scratch_root(self) -> ScratchRoot:
        with self._lock:
            if self._scratch is None:
                self._scratch = ScratchRoot(self._paths.state_dir / "sessions")
            return self._scratch

    def _grant(
        self,
        plan: SessionPlan,
        network: str,
        agent_dir: Path,
        egress_dir: Path,
        session_id: str,
        writer: str | None,
        allow: tuple[str, ...] | None = None,
        rendered: bool = False,
        grants: Path | None = None,
    ) -> Grant:
        request = EgressRequest(
            config=self._config, provider=plan.profile.provider, network=network,
            agent_dir=agent_dir, egress_dir=egress_dir, session=session_id, writer=writer,
            port=EGRESS_PORT, allow=allow, rendered=rendered, grants=grants,
            agent=plan.profile.agent,
        )  # fmt: skip
        host = self._egress_host() if network_info(network).egress else None
        return grant(request, host)

    # -- host ------------------------------------------------------------------------

    def _host_pi(self) -> Path:
        with self._lock:
            if self._pi is None:
                # Idempotent: returns at once when the pinned pi is already installed.
                self._pi = install_pi(self._paths.pi_prefix)
            return self._pi

    def _launch_host(self, plan: SessionPlan, session_id: str) -> Launched:
        if not plan.workspace_dir.is_dir():
            raise WriterpoolError("session_start_failed", "the workspace directory is unavailable")
        pi = self._host_pi()
        private = self._scratch_root().session_dir(session_id)
        agent_dir = private / "agent"
        tmp = private / "tmp"
        with _undo_on_failure() as undo:
            undo.append(lambda: shutil.rmtree(private, ignore_errors=True))
            tmp.mkdir(mode=0o700, exist_ok=True)
            held = self._grant(plan, "host", agent_dir, private / "egress", session_id, None)
            undo.append(held.revoke)
            args = agent_launch.pi_args(
                plan.profile, plan.read_only, agent_dir, session_dir=tmp / "pi-sessions"
            )
            argv = [str(pi), *args]
            env = pi_env(agent_dir, HOST, tmpdir=tmp)
            agent = PI.start(argv, env, plan.workspace_dir, HOST_READY_SECONDS)
        return Launched(agent=agent, grant=held, scratch=private)

    # -- containers ------------------------------------------------------------------

    def _launch_readonly(self, plan: SessionPlan, session_id: str) -> Launched:
        """A read-only session in a throwaway container: the checkout read-only at /work,
        provider egress only, no lease (nothing is written), any number at once."""
        from writerpool.pool.claims.readonly import ReadonlyContainer  # noqa: PLC0415 - see _lease_cold

        if not plan.workspace_dir.is_dir():
            raise WriterpoolError("session_start_failed", "the workspace directory is unavailable")
        container = ReadonlyContainer.prepare(self._paths, plan.image, session_id)
        private = self._scratch_root().session_dir(session_id)
        agent_dir, egress_dir = private / "agent", private / "egress"
        with _undo_on_failure() as undo:
            undo.append(lambda: shutil.rmtree(private, ignore_errors=True))
            held = self._grant(plan, "provider", agent_dir, egress_dir, session_id, None)
            undo.append(held.revoke)
            undo.append(container.remove)
            backend = backend_for(plan.profile.agent)
            argv = container.agent_argv(
                checkout=plan.workspace_dir.resolve(), agent_dir=agent_dir,
                egress_dir=egress_dir, pool=self._config.pool,
                command=backend.container_command(plan.profile, True, CONTAINER_AGENT_DIR,
                                                  CONTAINER_SESSION_DIR),
            )  # fmt: skip
            env = container.agent_env()
            agent = _started(held, lambda: backend.start(argv, env, None, CONTAINER_READY_SECONDS))
        return Launched(agent=agent, grant=held, scratch=private, container=container)

    def _launch_writer(self, plan: SessionPlan, session_id: str) -> Launched:
        warm = None
        if self._warm is not None:
            warm = self._warm.claim(plan.workspace, plan.base, plan.profile, session_id)
        if warm is not None:
            return self._claim_warm(plan, session_id, warm)
        from writerpool.pool.claims.lease_ready import WriterSlot  # noqa: PLC0415 - see _lease_cold

        slot = self._lease_cold(plan, self._host_set(), session_id)
        if not isinstance(slot, WriterSlot):
            return self._claim_warm(plan, session_id, slot)
        seat = contextlib.ExitStack()  # the host's egress endpoint and its watch
        with _undo_on_failure() as undo:
            undo += [seat.close, slot.release]
            held = self._open_egress(plan, slot, session_id, seat, undo)
            backend = backend_for(plan.profile.agent)
            argv, env = slot.agent_command(backend, plan.profile)
            started = _started(
                held, lambda: backend.start(argv, env, None, CONTAINER_READY_SECONDS)
            )
            agent = _watched(slot, started, seat)
        return Launched(agent=agent, grant=held, slot=slot, seat=seat)

    def _open_egress(
        self,
        plan: SessionPlan,
        slot: WriterSlot,
        session_id: str,
        seat: contextlib.ExitStack,
        undo: list[Callable[[], object]],
        rendered: bool = False,
    ) -> Grant:
        """The session's egress through the writer's host: its agent directory rendered
        (a token or key in it) and written there, its proxy started here, and (for a
        network with egress) the host's endpoint to that proxy held by `seat`."""
        host, writer = slot.host, slot.writer
        host.check_network(slot.network, slot.allow)
        with host.agent_dir(writer) as agent_dir:
            record = writer.record
            held = self._grant(plan, slot.network, agent_dir, record.egress, session_id,
                               slot.name, slot.allow, rendered, record.egress_grants)  # fmt: skip
            undo.append(held.revoke)
        if network_info(slot.network).egress:
            seat.enter_context(host.egress_endpoint(writer))
        return held

    def _lease_cold(
        self, plan: SessionPlan, hosts: WriterHosts, session_id: str
    ) -> WriterSlot | WarmWriter:
        """A writer leased for a cold start. When none is free, the warm pool may hold the
        rest: one it is warming now is waited for and claimed, else one warm for another
        provider or base gives way and the lease is tried once more."""
        # Loaded on first use: a server whose sessions all run on the host never
        # loads the Podman and writer-pool code.
        from writerpool.pool.claims.lease_ready import lease_ready_writer  # noqa: PLC0415

        try:
            return lease_ready_writer(self._paths, self._loaded, plan.workspace, plan.base,
                                      hosts=hosts)  # fmt: skip
        except WriterpoolError as exc:
            if exc.code != "writer_unavailable" or self._warm is None:
                raise
            self._warm.wait_warming(plan.workspace, CONTAINER_READY_SECONDS)
            warm = self._warm.claim(plan.workspace, plan.base, plan.profile, session_id)
            if warm is not None:
                return warm
            if not self._warm.give_way(plan.workspace):
                raise
        return lease_ready_writer(self._paths, self._loaded, plan.workspace, plan.base,
                                  hosts=hosts)  # fmt: skip

    def _claim_warm(self, plan: SessionPlan, session_id: str, warm: WarmWriter) -> Launched:
        """Grant a warm writer the session's egress (its token reaches the agent through
        the agent directory, which it reads again as it configures) and give the agent the
        session's model, on an empty session that persists nothing (WarmAgent.configure;
        only a backend that can warm is warmed: pool/claims/warm.py)."""
        slot, agent = warm.slot, warm.agent
        slot.lease.mark_warm(False)  # a session's now: operator commands wait for it
        seat = contextlib.ExitStack()
        with _undo_on_failure() as undo:
            undo += [seat.close, slot.release, lambda: agent.close(5.0)]
            # The pool rendered the agent directory for this provider when it warmed the
            # writer (claim() matches the provider), and has held the lease since.
            held = self._open_egress(plan, slot, session_id, seat, undo, rendered=True)
            profile = plan.profile
            agent.configure(profile.provider, profile.model, profile.thinking, CLAIM_SECONDS)
            held.ready()
            watched = _watched(slot, agent, seat)
        return Launched(agent=watched, grant=held, slot=slot, warm=True, seat=seat)


@contextlib.contextmanager
def _undo_on_failure() -> Iterator[list[Callable[[], object]]]:
    """The one cleanup of every launch path: on any failure (a cancellation too), the
    steps taken so far are undone, newest first, each even when another fails."""
    undo: list[Callable[[], object]] = []
    try:
        yield undo
    except BaseException:
        for step in reversed(undo):
            try:
                step()
            except Exception:  # the original failure is the one to raise
                log.exception("a launch step was not undone")
        raise


def _watched(slot: WriterSlot, agent: Agent, seat: contextlib.ExitStack) -> Agent:
    """The agent, its host watched for the session (`seat` stops the watch): a host found
    unreachable releases the writer and fails the running turn with its code."""
    watch = HostWatch(slot.host, lambda: lost(agent, slot.release))
    seat.callback(watch.stop)
    watch.start()
    return WatchedAgent(agent, watch)


def _started(held: Grant, start: Callable[[], Agent]) -> Agent:
    """The agent, started while the session's proxy process comes up: both ready, or neither."""
    agent = start()
    try:
        held.ready()
    except BaseException:
        agent.close(5.0)
        raise
    return agent
