"""The fence: with the lease held, no container of the writer may exist."""

from __future__ import annotations

import logging
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


def writer_containers(host: WriterHost, writer: Writer) -> list[ContainerRef]:
    """The writer's containers on its host, every one of them this state's to remove;
    writer_name_taken (nothing removed) when another writerpool state of that Podman
    account made one for a writer of the same name (state/controller.py)."""
    found = host.containers(LABEL_WRITER, writer.name)
    for container in found:  # bounded by the writer's containers: a session's, a tool's
        if container.controller not in ("", writer.controller):
            raise name_taken(f"container {container.name}", writer.name, writer.host,
                             container.controller, writer.controller)  # fmt: skip
    return found


def left_by_killed_clients(host: WriterHost, writer: Writer) -> list[ContainerRef]:
    """The leftovers (runtime/host.py) that hold a name of the writer's own containers:
    `writerpool-NAME` (its session, harness, tools) and `writerpool-NAME-ROLE` (provision,
    reset, inspect). A view's or a read-only session's name is unique and never reused,
    so none is taken here: one of those may be in the making beside the lease."""
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
    many. writer_fenced if unsure."""
    if not lease.held:
        raise WriterpoolError("writer_operation_failed", "the fence needs the writer's lease")
    try:
        orphans = [*writer_containers(host, writer), *left_by_killed_clients(host, writer)]
        for container in orphans:
            host.remove(container.id)
        # The lease is held, so nothing makes a container of the writer meanwhile: only
        # removals need confirming (one Podman call less on every session start).
        if orphans and (
            host.containers(LABEL_WRITER, writer.name) or left_by_killed_clients(host, writer)
        ):
            raise WriterpoolError("writer_fenced", "a container of the writer is still present")
    except PodmanApiUnavailable:
        raise  # its own code and remedy say more than "could not confirm"
    except PodmanUnavailable as exc:
        raise WriterpoolError(
            "writer_fenced", "could not confirm that no container of the writer exists"
        ) from exc
    remove_stale_egress(lease.path.parent / "egress")
    return len(orphans)


def remove_stale_egress(egress_dir: Path) -> None:
    """Remove the proxy sockets a killed server left (the provider proxy's and the
    allowlist proxy's); with the lease held and no container left, no session can be
    using them. Only a socket is removed, never through a link."""
    for name in (EGRESS_SOCKET, CONNECT_SOCKET):
        unlink_socket(egress_dir / name)
