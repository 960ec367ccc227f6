"""Leasing a ready writer to a coding session."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from writerpool.config.models import Config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.admission import LEASABLE, admit
from writerpool.pool.container import writer_layout, writer_spec
from writerpool.pool.fence import fence
from writerpool.pool.lease import Lease
from writerpool.pool.provision import writer_name
from writerpool.pool.verdicts import Verdict, advance, current, lease_count, remember
from writerpool.report import sanitize
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
    """Why the writer cannot take a session now (None: it can). The lease is held. A
    current verdict stands in for the inspection; a new refusal is recorded. The log
    keeps each reason the clone is not at its baseline; the client gets the words."""
    wdir = paths.writer_dir(state.name)
    count = lease_count(wdir)  # stable: the lease is held
    verdict = admit(paths, podman, config.pool, state, known=current(wdir))
    if verdict.leasable:
        advance(wdir)  # the session will change the clone
        return None
    if verdict.readiness is None:
        remember(wdir, count, Verdict(verdict.code, verdict.reason, verdict.problems))
    if verdict.problems:
        log.info("writer %s: %s", state.name, "; ".join(verdict.problems)[:500])
    return f"{verdict.reason} ({verdict.code})"


def _candidates(paths: Paths, alias: str, writers: int, refusals: list[str]) -> list[str]:
    """The workspace's writers in the order a start tries them: a current clean verdict
    first, then those not judged since their last lease. One whose current verdict
    refuses it is not tried at all (nothing leased it since; it is as it was judged).
    Bounded by the workspace's writer count."""
    clean, unknown = [], []
    for index in range(1, writers + 1):
        name = writer_name(alias, index)
        wdir = paths.writer_dir(name)
        if not (wdir / "state.json").exists():
            continue
        known = current(wdir)
        if known is None:
            unknown.append(name)
        elif known.code == LEASABLE:
            clean.append(name)
        else:
            refusals.append(f"{name} {known.reason} ({known.code})")
    return clean + unknown


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
    podman = podman or Podman()
    entry = load_modes(paths).workspaces.get(alias)
    if entry is None or entry.container is None:
        raise WriterpoolError("writer_unavailable", "the workspace has no writers")
    wanted = base or entry.container.base
    refusals: list[str] = []
    for name in _candidates(paths, alias, entry.container.writers, refusals):
        wdir = paths.writer_dir(name)
        lease = Lease(wdir)
        try:
            lease.acquire(wait=0, judging=True)
        except WriterpoolError as exc:
            refusals.append(f"{name} {exc.code}")  # busy with a session or a command
            continue
        try:
            state = load_state(wdir)
            if state is None or state.base.name != wanted:
                if state is not None:
                    refusals.append(f"{name} is on base {state.base.name}")
                lease.release()
                continue
            fence(podman, name, lease)
            refusal = _admit(paths, podman, config, state)
            if refusal is not None:
                log.info("writer %s not leased: %s", name, refusal)
                refusals.append(f"{name} {refusal}")
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
            refusals.append(f"{name} {exc.code}")
            lease.release()
            continue
    raise _unavailable(wanted, refusals)
