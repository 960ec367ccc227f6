"""Leasing a ready writer to a coding session."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from writerpool.config.models import Config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.choose import choose, tree_entries
from writerpool.pool.container import writer_layout, writer_spec
from writerpool.pool.lease import Lease
from writerpool.pool.verdicts import mark_changed
from writerpool.report import sanitize
from writerpool.runtime.image import resolve_image
from writerpool.runtime.podman import Podman
from writerpool.runtime.spec import ContainerSpec

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
    allow: tuple[str, ...] | None  # the workspace's allowlist words, when it has one
    spec: ContainerSpec
    podman: Podman
    lease: Lease
    refused: list[str] = field(default_factory=list)
    # Entries of the work tree when it was taken at its baseline (choose.tree_entries).
    shape: int | None = None

    def pi_argv(self, pi_args: list[str]) -> list[str]:
        return self.podman.run_argv(self.spec, ["pi", *pi_args], interactive=True)

    def release(self) -> None:
        """Stop the session's container (if still there) and free the lease."""
        if not self.lease.held:
            return
        try:
            for container in self.podman.writer_containers(self.name):
                self.podman.remove(container.id)
            self._note_shape()
        finally:
            self.lease.release()

    def _note_shape(self) -> None:
        """With the agent gone and the lease still held: a work tree whose entry count
        changed is certainly not at its baseline, so starts try this writer last."""
        clone = self.agent_dir.parent / "clone"
        if self.shape is not None and tree_entries(clone) != self.shape:
            mark_changed(self.lease.path.parent)


def _unavailable(wanted: str, refusals: list[str]) -> WriterpoolError:
    """writer_unavailable naming each writer's reason (codes and short words, no paths)."""
    detail = "; ".join(refusals) or "none is provisioned"
    return WriterpoolError(
        "writer_unavailable",
        sanitize(f"no free ready writer on base {wanted}: {detail}")[:900]
        + "; `writerpool writer status` says what to run",
    )


def lease_ready_writer(
    paths: Paths, config: Config, alias: str, base: str | None, podman: Podman | None = None
) -> WriterSlot:
    """A ready writer at its baseline, leased (pool/choose.py says which)."""
    podman = podman or Podman()
    entry = load_modes(paths).workspaces.get(alias)
    if entry is None or entry.container is None:
        raise WriterpoolError("writer_unavailable", "the workspace has no writers")
    wanted = base or entry.container.base
    refusals: list[str] = []
    writers = entry.container.writers
    chosen = choose(paths, podman, config, alias, writers, wanted, refusals)
    if chosen is None or chosen.lease is None or chosen.state is None:
        raise _unavailable(wanted, refusals)
    state, lease = chosen.state, chosen.lease
    try:
        image_id = resolve_image(paths, state.image)
        clone = writer_layout(paths, state.name)["clone"]
        return WriterSlot(
            name=state.name,
            base_ref=state.base.name,
            base_commit=state.base.commit,
            agent_dir=writer_layout(paths, state.name)["agent"],
            egress_dir=writer_layout(paths, state.name)["egress"],
            network=state.network,
            allow=entry.container.allow,
            spec=writer_spec(
                paths, state, image_id, config.pool, allow=entry.container.allow is not None
            ),
            podman=podman,
            lease=lease,
            shape=tree_entries(clone),
        )
    except WriterpoolError:
        lease.release()
        raise
