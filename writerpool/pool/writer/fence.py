"""The fence: with the lease held, no container of the writer may exist."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from writerpool.egress.sockets import unlink_socket
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.container import CONNECT_SOCKET, EGRESS_SOCKET
from writerpool.pool.writer.lease import Lease
from writerpool.runtime.host import ContainerRef, Writer, WriterHost
from writerpool.runtime.podman import PodmanApiUnavailable, PodmanUnavailable
from writerpool.runtime.spec import LABEL_WRITER
from writerpool.state.controller import name_taken

log = logging.getLogger(__name__)
# Longer than Podman takes between making a container in its store and recording it.
LEFTOVER_GRACE = 15.0


def writer_containers(
    host: WriterHost, writer: Writer
) -> tuple[list[ContainerRef], list[ContainerRef]]:
    """The writer's containers on its host: those this state may remove (its own, or an
    older writerpool's without an id), and those another writerpool state of that Podman
    account made for a writer of the same name (state/controller.py), never touched."""
    found = host.containers(LABEL_WRITER, writer.name)
    # Bounded by the writer's containers: a session's, a tool's.
    own = [c for c in found if writer.owns(c.controller)]
    return own, [c for c in found if c not in own]


def refuse_others(others: list[ContainerRef], writer: Writer) -> None:
    """writer_name_taken when another state's container of the writer's name is there."""
    if others:
        raise name_taken(f"container {others[0].name}", writer.name, writer.host,
                         others[0].controller, writer.controller)  # fmt: skip


def left_by_killed_clients(host: WriterHost, writer: Writer) -> list[ContainerRef]:
    """The leftovers (runtime/host.py) that hold a name of the writer's own containers:
    `writerpool-NAME` (its session, harness, tools) and `writerpool-NAME-ROLE` (provision,
    reset, inspect). A view's or a read-only session's name is unique and never reused,
    so none is taken here: one of those may be in the making beside the lease.
    One younger than LEFTOVER_GRACE may be another state's container of that name in
    the making (Podman's store holds it before Podman records it): it is taken only if
    it is still a leftover once it is that old."""
    found = _holding(host, writer)
    young = [c.age or 0.0 for c in found if c.age is None or c.age < LEFTOVER_GRACE]
    if not young:
        return found
    time.sleep(LEFTOVER_GRACE - min(young))  # once, at most the grace: a leftover is rare
    again = {c.id for c in _holding(host, writer)}
    return [c for c in found if c.id in again]


def _holding(host: WriterHost, writer: Writer) -> list[ContainerRef]:
    own = f"writerpool-{writer.name}"
    try:
        found = host.leftovers()
    except PodmanUnavailable as exc:
        # A leftover runs nothing, so the fence holds without this list: the name stays
        # taken until a later fence lists it.
        log.warning("writer %s: the leftovers were not listed: %s", writer.name, exc)
        return []
    return [c for c in found if _holds(c.name, own)]  # bounded by the leftovers, each rare


def _holds(name: str, own: str) -> bool:
    # Another writer's name ends in -wN, so letters alone after `own-` are a role.
    role = name.removeprefix(f"{own}-")
    return name == own or (role != name and role.isascii() and role.isalpha() and role.islower())


def fence(host: WriterHost, writer: Writer, lease: Lease) -> int:
    """Remove the writer's orphaned containers, and the leftovers holding its names (no
    work is in one: it never started, and a writer's work is in its storage); return how
    many. writer_fenced if unsure; writer_name_taken, once this state's are removed, when
    another state has a container of the writer's name."""
    if not lease.held:
        raise WriterpoolError("writer_operation_failed", "the fence needs the writer's lease")
    try:
        own, others = writer_containers(host, writer)
        left = left_by_killed_clients(host, writer)
        for container in (*own, *left):
            host.remove(container.id)
        # The lease is held, so nothing of this state makes a container of the writer
        # meanwhile: only removals need confirming (one Podman call less on every start).
        own_left = bool(own) and bool(writer_containers(host, writer)[0])
        gone = {c.id for c in left}
        if own_left or (gone and gone & {c.id for c in _holding(host, writer)}):
            raise WriterpoolError("writer_fenced", "a container of the writer is still present")
    except PodmanApiUnavailable:
        raise  # its own code and remedy say more than "could not confirm"
    except PodmanUnavailable as exc:
        raise WriterpoolError(
            "writer_fenced", "could not confirm that no container of the writer exists"
        ) from exc
    refuse_others(others, writer)
    remove_stale_egress(lease.path.parent / "egress")
    return len(own) + len(left)


def remove_stale_egress(egress_dir: Path) -> None:
    """Remove the proxy sockets a killed server left (the provider proxy's and the
    allowlist proxy's); with the lease held and no container left, no session can be
    using them. Only a socket is removed, never through a link."""
    for name in (EGRESS_SOCKET, CONNECT_SOCKET):
        unlink_socket(egress_dir / name)
