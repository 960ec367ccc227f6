"""Starting and stopping a session's agent: pi on the host, or pi in a leased writer."""

from __future__ import annotations

import json
import logging
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from writerpool.agent import launch as agent_launch
from writerpool.agent.install import install_pi
from writerpool.agent.pi import PiAgent
from writerpool.config.models import Config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.placement import SessionPlan
from writerpool.mcp.scratch import ScratchRoot, sweep
from writerpool.mcp.turns import Snapshot

if TYPE_CHECKING:
    from writerpool.pool.sessions import WriterSlot

log = logging.getLogger(__name__)

HOST_READY_SECONDS = 30.0
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
    scratch: Path | None = None  # a host session's private directory, removed at close
    slot: WriterSlot | None = None

    @property
    def writer(self) -> str | None:
        return self.slot.name if self.slot is not None else None

    @property
    def base(self) -> dict[str, str] | None:
        if self.slot is None:
            return None
        return {"ref": self.slot.base_ref, "commit": self.slot.base_commit}


class Launcher:
    def __init__(self, paths: Paths, config: Config) -> None:
        self._paths = paths
        self._config = config
        self._pi: Path | None = None
        self._scratch: ScratchRoot | None = None
        self._lock = threading.Lock()
        # Credentials left by a server that was killed go now, not at the next session.
        try:
            sweep(paths.state_dir / "sessions", keep="")
        except OSError as exc:
            log.warning("stale session directories not swept: %s", exc.strerror)
        try:
            sweep_writer_credentials(paths)
        except OSError as exc:
            log.warning("stale writer credentials not swept: %s", exc.strerror)

    def launch(self, plan: SessionPlan, session_id: str) -> Launched:
        provider = self._config.providers.get(plan.profile.provider)
        key = agent_launch.provider_credential(plan.profile.provider, provider)
        if key is None:
            raise WriterpoolError(
                "provider_unconfigured",
                f"no credential is available for provider {plan.profile.provider!r}",
            )
        if plan.placement == "container":
            return self._launch_container(plan, key)
        return self._launch_host(plan, session_id, key)

    def stop(self, launched: Launched, timeout: float) -> None:
        """Stop pi (and so its container), remove the credential, release the writer.
        Every step runs even when an earlier one fails."""
        try:
            launched.agent.close(timeout)
        finally:
            try:
                agent_launch.remove_credential(launched.agent_dir)
            finally:
                try:
                    if launched.slot is not None:
                        launched.slot.release()
                finally:
                    if launched.scratch is not None:
                        shutil.rmtree(launched.scratch, ignore_errors=True)

    def shutdown(self) -> None:
        with self._lock:
            if self._scratch is not None:
                self._scratch.close()
                self._scratch = None

    # -- host ------------------------------------------------------------------------

    def _host_prereqs(self) -> tuple[Path, ScratchRoot]:
        with self._lock:
            if self._pi is None:
                # Idempotent: returns at once when the pinned pi is already installed.
                self._pi = install_pi(self._paths.pi_prefix)
            if self._scratch is None:
                self._scratch = ScratchRoot(self._paths.state_dir / "sessions")
            return self._pi, self._scratch

    def _launch_host(self, plan: SessionPlan, session_id: str, key: str) -> Launched:
        if not plan.workspace_dir.is_dir():
            raise WriterpoolError("session_start_failed", "the workspace directory is unavailable")
        pi, scratch = self._host_prereqs()
        private = scratch.session_dir(session_id)
        agent_dir = private / "agent"
        tmp = private / "tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        try:
            agent_launch.render_for_profile(self._config, agent_dir, plan.profile.provider, False)
            agent_launch.install_credential(agent_dir, plan.profile.provider, key)
            argv = [str(pi), *agent_launch.pi_args(plan.profile, plan.read_only, agent_dir)]
            env = agent_launch.host_env(agent_dir, tmp)
            agent = PiAgent.start(argv, env, plan.workspace_dir, HOST_READY_SECONDS)
        except BaseException:
            shutil.rmtree(private, ignore_errors=True)
            raise
        return Launched(agent=agent, agent_dir=agent_dir, scratch=private)

    # -- container -------------------------------------------------------------------

    def _launch_container(self, plan: SessionPlan, key: str) -> Launched:
        # Loaded on first use: a server whose sessions all run on the host never
        # loads the Podman and writer-pool code.
        from writerpool.pool.sessions import lease_ready_writer  # noqa: PLC0415
        from writerpool.runtime.podman import podman_env  # noqa: PLC0415

        slot = lease_ready_writer(self._paths, self._config, plan.workspace, plan.base)
        try:
            # Rendered anew for this session's provider: this also replaces anything a
            # killed server left behind, its credential included.
            agent_launch.remove_credential(slot.agent_dir)
            agent_launch.render_for_profile(
                self._config, slot.agent_dir, plan.profile.provider, True
            )
            agent_launch.install_credential(slot.agent_dir, plan.profile.provider, key)
            args = agent_launch.pi_args(plan.profile, False, CONTAINER_AGENT_DIR)
            # Podman needs the account's real home (its storage), whatever HOME says.
            argv = slot.pi_argv(args)
            agent = PiAgent.start(argv, podman_env(), None, CONTAINER_READY_SECONDS)
        except BaseException:
            try:
                agent_launch.remove_credential(slot.agent_dir)
            finally:
                slot.release()
            raise
        return Launched(agent=agent, agent_dir=slot.agent_dir, slot=slot)


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


def sweep_writer_credentials(paths: Paths) -> int:
    """Remove the keys a killed server left in writers' agent directories; returns how
    many. A writer whose lease is held (a live session elsewhere, or an operator
    command) is left alone: its lease is dropped by the kernel only when its holder dies."""
    from writerpool.pool.lease import Lease  # noqa: PLC0415 - only when writers exist

    if not paths.writers_dir.is_dir():
        return 0
    removed = 0
    for writer_dir in sorted(paths.writers_dir.iterdir()):
        agent_dir = writer_dir / "agent"
        if writer_dir.is_symlink() or not agent_dir.is_dir() or not _holds_credential(agent_dir):
            continue
        lease = Lease(writer_dir)
        try:
            lease.acquire(wait=0)
        except WriterpoolError:
            continue
        try:
            agent_launch.remove_credential(agent_dir)
        finally:
            lease.release()
        removed += 1
    if removed:
        log.info("removed the credentials of %d writer session(s) of a stopped server", removed)
    return removed
