"""Leasing a ready writer to a coding session."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from writerpool.config.models import Config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.acceptance import readiness
from writerpool.pool.baseline import writer_problems
from writerpool.pool.container import writer_layout, writer_spec
from writerpool.pool.fence import fence
from writerpool.pool.lease import Lease
from writerpool.pool.provision import writer_name
from writerpool.runtime.image import resolve_image
from writerpool.runtime.podman import Podman
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import WriterState, load_state

log = logging.getLogger(__name__)


@dataclass
class WriterSlot:
    """A writer leased to one session; the lease is held until release()."""

    name: str
    base_ref: str
    base_commit: str
    agent_dir: Path
    egress_dir: Path
    network: str  # the writer's network kind
    spec: ContainerSpec
    podman: Podman
    lease: Lease
    refused: list[str] = field(default_factory=list)

    def pi_argv(self, pi_args: list[str]) -> list[str]:
        return self.podman.run_argv(self.spec, ["pi", *pi_args], interactive=True)

    def release(self) -> None:
        """Stop the session's container (if still there) and free the lease."""
        if not self.lease.held:
            return
        try:
            for container in self.podman.writer_containers(self.name):
                self.podman.remove(container.id)
        finally:
            self.lease.release()


def _admit(paths: Paths, podman: Podman, config: Config, state: WriterState) -> str | None:
    """Why the writer cannot take a session now (None: it can). The lease is held."""
    phase, reason = readiness(paths, podman, state, config.pool)
    if phase != "ready":
        return reason or "writer_not_ready"
    # By content, not by what git reports: an ignored file, a forged index, a FIFO or a
    # planted ref would otherwise carry one session's state into the next. Also catches
    # a `.git` renamed away and rebuilt with the agent's own hooks and settings.
    problems = writer_problems(paths, podman, state, config.pool)
    if problems:
        return "writer_not_at_baseline: " + "; ".join(problems)[:500]
    return None


def lease_ready_writer(
    paths: Paths, config: Config, alias: str, base: str | None, podman: Podman | None = None
) -> WriterSlot:
    podman = podman or Podman()
    entry = load_modes(paths).workspaces.get(alias)
    if entry is None or entry.container is None:
        raise WriterpoolError("writer_unavailable", "the workspace has no writers")
    wanted = base or entry.container.base
    for index in range(1, entry.container.writers + 1):
        name = writer_name(alias, index)
        wdir = paths.writer_dir(name)
        if not (wdir / "state.json").exists():
            continue
        lease = Lease(wdir)
        try:
            lease.acquire(wait=0)
        except WriterpoolError:
            continue  # busy with another session or an operator command
        try:
            state = load_state(wdir)
            if state is None or state.base.name != wanted:
                lease.release()
                continue
            fence(podman, name, lease)
            refusal = _admit(paths, podman, config, state)
            if refusal is not None:
                # Clients only learn writer_unavailable; the operator's log says why.
                log.info("writer %s not leased: %s", name, refusal)
                lease.release()
                continue
            image_id = resolve_image(paths, state.image)
            return WriterSlot(
                name=name,
                base_ref=state.base.name,
                base_commit=state.base.commit,
                agent_dir=writer_layout(paths, name)["agent"],
                egress_dir=writer_layout(paths, name)["egress"],
                network=state.network,
                spec=writer_spec(paths, state, image_id, config.pool),
                podman=podman,
                lease=lease,
            )
        except WriterpoolError as exc:
            log.info("writer %s not leased: %s", name, exc.code)
            lease.release()
            continue
    raise WriterpoolError("writer_unavailable", "no free ready writer on that base")
