"""Starting and stopping a session's agent: pi in a leased writer (coding), pi in a
throwaway read-only container (read-only), or pi on the host (host mode)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from writerpool.agent import launch as agent_launch
from writerpool.agent.egress import EgressRequest, Grant, grant
from writerpool.agent.environment import HOST, pi_env
from writerpool.agent.install import install_pi
from writerpool.agent.pi import PiAgent
from writerpool.audit import audit_connect, audit_egress
from writerpool.config.models import LoadedConfig
from writerpool.config.network import network_info
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.placement import SessionPlan
from writerpool.mcp.scratch import ScratchRoot, sweep
from writerpool.mcp.turns import Snapshot
from writerpool.pool.container import CONNECT_SOCKET, EGRESS_PORT, EGRESS_SOCKET, readonly_spec
from writerpool.pool.fence import remove_stale_egress

if TYPE_CHECKING:
    from writerpool.egress.connect_model import ConnectRecord
    from writerpool.egress.host import EgressHost
    from writerpool.egress.model import EgressRecord
    from writerpool.pool.sessions import WriterSlot
    from writerpool.pool.warm import WarmPool, WarmWriter

log = logging.getLogger(__name__)

HOST_READY_SECONDS = 30.0
# A warm pi answers new_session, set_model and set_thinking_level in milliseconds.
CLAIM_SECONDS = 10.0
# A container adds Podman's start to pi's own (about a second each on this kind of host).
CONTAINER_READY_SECONDS = 90.0
# Where the writer's private agent directory is mounted inside its container.
CONTAINER_AGENT_DIR = Path("/pi/agent")


class Agent(Protocol):
    """The part of the pi adapter a session uses."""

    @property
    def alive(self) -> bool: ...
    def prompt(self, message: str) -> str: ...
    def abort(self) -> None: ...
    def turn(self, turn_id: str) -> Snapshot: ...
    def wait(self, turn_id: str, timeout: float) -> Snapshot: ...
    def close(self, timeout: float) -> None: ...


@dataclass
class Launched:
    agent: Agent
    agent_dir: Path
    grant: Grant  # the session's egress: ended at close
    scratch: Path | None = None  # the session's private directory, removed at close
    slot: WriterSlot | None = None
    uncommitted: bool | None = None  # a writer session's clone at close (None: unknown)
    container: str | None = None  # a read-only session's container label

    @property
    def writer(self) -> str | None:
        return self.slot.name if self.slot is not None else None

    @property
    def base(self) -> dict[str, str] | None:
        if self.slot is None:
            return None
        return {"ref": self.slot.base_ref, "commit": self.slot.base_commit}


class Launcher:
    def __init__(
        self, paths: Paths, loaded: LoadedConfig, warm: WarmPool | None = None
    ) -> None:
        self._paths = paths
        self._loaded = loaded
        self._warm = warm  # the pool service's warm writers, claimed before a cold start
        if warm is not None:
            warm.keep_spares_with(lambda count: self._egress_host().keep_spares(count))
        self._config = loaded.config
        self._pi: Path | None = None
        self._scratch: ScratchRoot | None = None
        self._egress: EgressHost | None = None
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
                        launched.uncommitted = launched.slot.uncommitted()
                        launched.slot.release()
                    if launched.container is not None:
                        remove_session_containers(launched.container)
                finally:
                    if launched.scratch is not None:
                        shutil.rmtree(launched.scratch, ignore_errors=True)

    def shutdown(self) -> None:
        with self._lock:
            if self._egress is not None:
                self._egress.close()
                self._egress = None
            if self._scratch is not None:
                self._scratch.close()
                self._scratch = None

    def _egress_host(self) -> EgressHost:
        with self._lock:
            if self._egress is None:
                # Made on first use: a server without contained sessions starts no egress process.
                from writerpool.egress.host import EgressHost  # noqa: PLC0415

                self._egress = EgressHost(audit=egress_auditor(self._paths),
                                          connect_audit=connect_auditor(self._paths))  # fmt: skip
            return self._egress

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
    ) -> Grant:
        request = EgressRequest(
            config=self._config, provider=plan.profile.provider, network=network,
            agent_dir=agent_dir, egress_dir=egress_dir, session=session_id, writer=writer,
            port=EGRESS_PORT, allow=allow, rendered=rendered,
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
        tmp.mkdir(mode=0o700, exist_ok=True)
        try:
            held = self._grant(plan, "host", agent_dir, private / "egress", session_id, None)
            try:
                argv = [str(pi), *agent_launch.pi_args(plan.profile, plan.read_only, agent_dir)]
                env = pi_env(agent_dir, HOST, tmpdir=tmp)
                agent = PiAgent.start(argv, env, plan.workspace_dir, HOST_READY_SECONDS)
            except BaseException:
                held.revoke()
                raise
        except BaseException:
            shutil.rmtree(private, ignore_errors=True)
            raise
        return Launched(agent=agent, agent_dir=agent_dir, grant=held, scratch=private)

    # -- containers ------------------------------------------------------------------

    def _launch_readonly(self, plan: SessionPlan, session_id: str) -> Launched:
        """A read-only session in a throwaway container: the checkout read-only at /work,
        provider egress only, no lease (nothing is written), any number at once."""
        from writerpool.runtime.image import resolve_image  # noqa: PLC0415
        from writerpool.runtime.podman import Podman, podman_env  # noqa: PLC0415

        if not plan.workspace_dir.is_dir():
            raise WriterpoolError("session_start_failed", "the workspace directory is unavailable")
        image_id = resolve_image(self._paths, plan.image)
        private = self._scratch_root().session_dir(session_id)
        agent_dir, egress_dir = private / "agent", private / "egress"
        try:
            held = self._grant(plan, "provider", agent_dir, egress_dir, session_id, None)
            try:
                spec = readonly_spec(
                    image_id=image_id, session_id=session_id,
                    checkout=plan.workspace_dir.resolve(), agent_dir=agent_dir,
                    egress_dir=egress_dir, pool=self._config.pool,
                )  # fmt: skip
                args = agent_launch.pi_args(plan.profile, True, CONTAINER_AGENT_DIR)
                argv = Podman().run_argv(spec, ["pi", *args], interactive=True)
                agent = _started(
                    held, lambda: PiAgent.start(argv, podman_env(), None, CONTAINER_READY_SECONDS)
                )
            except BaseException:
                held.revoke()
                remove_session_containers(session_id)
                raise
        except BaseException:
            shutil.rmtree(private, ignore_errors=True)
            raise
        return Launched(
            agent=agent, agent_dir=agent_dir, grant=held, scratch=private,
            container=session_id,
        )  # fmt: skip

    def _launch_writer(self, plan: SessionPlan, session_id: str) -> Launched:
        # Loaded on first use: a server whose sessions all run on the host never
        # loads the Podman and writer-pool code.
        from writerpool.pool.sessions import lease_ready_writer  # noqa: PLC0415
        from writerpool.runtime.podman import podman_env  # noqa: PLC0415

        warm = None
        if self._warm is not None:
            warm = self._warm.claim(plan.workspace, plan.base, plan.profile)
        if warm is not None:
            return self._claim_warm(plan, session_id, warm)
        slot = lease_ready_writer(self._paths, self._loaded, plan.workspace, plan.base)
        try:
            held = self._grant(
                plan, slot.network, slot.agent_dir, slot.egress_dir, session_id, slot.name,
                slot.allow,
            )  # fmt: skip
            try:
                args = agent_launch.pi_args(plan.profile, False, CONTAINER_AGENT_DIR)
                # Podman needs the account's real home (its storage), whatever HOME says.
                agent = _started(
                    held,
                    lambda: PiAgent.start(
                        slot.pi_argv(args), podman_env(), None, CONTAINER_READY_SECONDS
                    ),
                )
            except BaseException:
                held.revoke()
                raise
        except BaseException:
            slot.release()
            raise
        return Launched(agent=agent, agent_dir=slot.agent_dir, grant=held, slot=slot)

    def _claim_warm(self, plan: SessionPlan, session_id: str, warm: WarmWriter) -> Launched:
        """Grant a warm writer the session's egress (its token reaches pi through the
        agent directory, which new_session reads again) and give pi the session's model."""
        slot, agent = warm.slot, warm.agent
        slot.lease.mark_warm(False)  # a session's now: operator commands wait for it
        try:
            # The pool rendered the agent directory for this provider when it warmed the
            # writer (claim() matches the provider), and has held the lease since.
            held = self._grant(
                plan, slot.network, slot.agent_dir, slot.egress_dir, session_id, slot.name,
                slot.allow, rendered=True,
            )  # fmt: skip
            try:
                profile = plan.profile
                agent.configure(profile.provider, profile.model, profile.thinking, CLAIM_SECONDS)
                held.ready()
            except BaseException:
                held.revoke()
                raise
        except BaseException:
            agent.close(5.0)
            slot.release()
            raise
        return Launched(agent=agent, agent_dir=slot.agent_dir, grant=held, slot=slot)


def _started(held: Grant, start: Callable[[], Agent]) -> Agent:
    """pi, started while the session's proxy process comes up: both ready, or neither."""
    agent = start()
    try:
        held.ready()
    except BaseException:
        agent.close(5.0)
        raise
    return agent


def remove_session_containers(session: str) -> None:
    """Remove a read-only session's container if `--rm` did not (pi was killed)."""
    from writerpool.runtime.podman import Podman  # noqa: PLC0415
    from writerpool.runtime.spec import LABEL_SESSION  # noqa: PLC0415

    podman = Podman()
    try:
        for container in podman.containers(LABEL_SESSION, session):
            podman.remove(container.id)
    except WriterpoolError as exc:
        log.warning("a read-only session's container was not removed: %s", exc.code)


def egress_auditor(paths: Paths) -> Callable[[EgressRecord], None]:
    def record(entry: EgressRecord) -> None:
        try:
            audit_egress(paths, entry)
        except OSError as exc:
            log.warning("an egress audit line was not written: %s", exc.strerror)

    return record


def connect_auditor(paths: Paths) -> Callable[[ConnectRecord], None]:
    def record(entry: ConnectRecord) -> None:
        try:
            audit_connect(paths, entry)
        except OSError as exc:
            log.warning("an allowlist audit line was not written: %s", exc.strerror)

    return record


def _holds_credential(agent_dir: Path) -> bool:
    """Whether a writer's agent directory may hold a session's key (unreadable: yes)."""
    if (agent_dir / "auth.json").exists():
        return True
    try:
        document = json.loads((agent_dir / "models.json").read_bytes())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True
    providers = document.get("providers") if isinstance(document, dict) else None
    if not isinstance(providers, dict):
        return True
    unkeyed = (None, agent_launch.PLACEHOLDER_KEY)
    return any(
        not isinstance(entry, dict) or entry.get("apiKey") not in unkeyed
        for entry in providers.values()
    )


def _holds_socket(egress_dir: Path) -> bool:
    """Whether a proxy socket (the provider's or the allowlist's) is left in egress_dir."""
    for name in (EGRESS_SOCKET, CONNECT_SOCKET):
        try:
            if stat.S_ISSOCK(os.lstat(egress_dir / name).st_mode):
                return True
        except OSError:
            continue
    return False


def sweep_writer_credentials(paths: Paths) -> int:
    """Remove the keys a killed server left in writers' agent directories; returns how
    many. A writer whose lease is held (a live session elsewhere, or an operator
    command) is left alone: its lease is dropped by the kernel only when its holder dies."""
    from writerpool.pool.lease import Lease  # noqa: PLC0415 - only when writers exist

    if not paths.writers_dir.is_dir():
        return 0
    removed = 0
    for writer_dir in sorted(paths.writers_dir.iterdir()):
        agent_dir, egress_dir = writer_dir / "agent", writer_dir / "egress"
        if writer_dir.is_symlink() or not agent_dir.is_dir():
            continue
        # Keyed on the socket too: a server killed after its proxy listened but before
        # the token was written left a socket and no credential.
        if not _holds_credential(agent_dir) and not _holds_socket(egress_dir):
            continue
        lease = Lease(writer_dir)
        try:
            lease.acquire(wait=0)
        except WriterpoolError:
            continue
        try:
            agent_launch.remove_credential(agent_dir)
            remove_stale_egress(egress_dir)
        finally:
            lease.release()
        removed += 1
    if removed:
        log.info("removed the credentials of %d writer session(s) of a stopped server", removed)
    return removed
