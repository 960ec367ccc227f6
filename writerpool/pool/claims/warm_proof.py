"""What a warm writer's claim proves, from file reads only (no Podman call, no SSH).

A writer is warmed only once `prove` passes under the pool's lease, and claimed only
when it passes again with the same result:

- the lease: the pool's lock is still on the writer's lease file as it is now, so no
  session or command has had the writer since it was warmed (pool/writer/lease.py);
- the content verdict: the guard's recorded verdict on the clone is current (nothing
  leased the writer since it was recorded and its state file is the one it was made
  from) and is writer_leasable; at the claim it must be the very record the writer was
  warmed on, named by its digest (pool/writer/verdicts.py);
- the acceptance fingerprint: recomputed from the settings as they are now, the image
  the container runs and the host's facts when it started, it equals the fingerprint
  acceptance recorded; the image pin still names that image; the host's isolation
  control is current (pool/acceptance/).

The claim's audit line (`warm_claim`) carries the verdict's digest and the fingerprint.
A writer that fails any of them is recycled (`warm_recycle`, with the code why): its pi
and container stop, its lease count advances (the next lease inspects the clone again)
and its lease is released.
"""

from __future__ import annotations

from dataclasses import dataclass

from writerpool.config.models import Config, LoadedConfig
from writerpool.config.modes import ExecutionModes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.pool.acceptance.accept import fingerprint_of, groups_given
from writerpool.pool.acceptance.control import control_current
from writerpool.pool.claims.admission import LEASABLE
from writerpool.pool.claims.lease_ready import WriterSlot
from writerpool.pool.claims.refresh import checkout_of
from writerpool.pool.writer.lease import yield_asked
from writerpool.pool.writer.verdicts import current
from writerpool.runtime.host import EngineFacts
from writerpool.runtime.image import load_pin

# Why a warm writer is recycled (audit outcome codes, writerpool/errors.py).
LEASE_LOST = "warm_lease_lost"
VERDICT_STALE = "warm_verdict_stale"
IMAGE_CHANGED = "warm_image_changed"
ACCEPTANCE_STALE = "writer_acceptance_stale"
CONTROL_REQUIRED = "isolation_control_required"
YIELD_ASKED = "warm_yield_asked"
PI_ENDED = "warm_pi_ended"
TOO_OLD = "warm_too_old"  # held longer than [pool] warm_max_age_seconds
BASE_MOVED = "warm_base_moved"  # the workspace's base is another commit (or branch) now


@dataclass(frozen=True)
class Proof:
    """What a warm writer was proven against: the verdict record and the fingerprint."""

    verdict_digest: str
    fingerprint: str


def prove(
    paths: Paths, config: Config, slot: WriterSlot, image_id: str, facts: EngineFacts
) -> Proof | str:
    """The proof that the leased writer `slot`, whose container runs `image_id` on a host
    with `facts`, may take a session now; else the code saying why not."""
    writer_dir = paths.writer_dir(slot.name)
    state = slot.state
    if state is None or not slot.lease.proven():
        return LEASE_LOST
    if yield_asked(writer_dir):
        return YIELD_ASKED
    verdict = current(writer_dir)
    if verdict is None or verdict.code != LEASABLE or not verdict.digest:
        return VERDICT_STALE
    if not control_current(paths, slot.host.name):
        return CONTROL_REQUIRED
    pin = load_pin(paths)
    if state.image == "default" and (pin is None or pin.image_id != image_id):
        return IMAGE_CHANGED
    groups = groups_given(paths, slot.host, state, config, image_id, facts)
    fingerprint = fingerprint_of(groups)
    if state.fingerprint is None or fingerprint != state.fingerprint:
        return ACCEPTANCE_STALE
    return Proof(verdict.digest, fingerprint)


def still(proof: Proof | str, warmed: Proof) -> str | None:
    """None when `proof` (made now) is the one the writer was warmed on, else why not."""
    if isinstance(proof, str):
        return proof
    if proof.verdict_digest != warmed.verdict_digest:
        return VERDICT_STALE
    if proof.fingerprint != warmed.fingerprint:
        return ACCEPTANCE_STALE
    return None


def base_moved(
    loaded: LoadedConfig, modes: ExecutionModes, alias: str, slot: WriterSlot
) -> str | None:
    """BASE_MOVED when `alias`'s base is not the commit its warm writer `slot` was warmed
    on: a cold start would refresh its writer to the base as it is now (a base the
    checkout lost: its code)."""
    entry = modes.workspaces.get(alias)
    if entry is None or entry.container is None:
        return None  # the next fill retires it with its workspace's count
    try:
        now = resolve_base(checkout_of(loaded, alias), entry.container.base)
    except WriterpoolError as exc:
        return exc.code
    if (now.name, now.commit) != (slot.base_ref, slot.base_commit):
        return BASE_MOVED
    return None
