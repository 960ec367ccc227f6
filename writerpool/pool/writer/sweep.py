"""What a killed server leaves behind, removed by the next one: a session's key in a
writer's agent directory, a proxy socket beside it, a read-only session's container."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from writerpool.agent.backends import holds_credential, remove_credentials
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.container import CONNECT_SOCKET, EGRESS_SOCKET
from writerpool.pool.writer.fence import remove_stale_egress
from writerpool.pool.writer.lease import Lease
from writerpool.runtime.host import WriterHost
from writerpool.runtime.spec import LABEL_SESSION

log = logging.getLogger(__name__)


def remove_session_containers(host: WriterHost, session: str) -> None:
    """Remove a read-only session's container if `--rm` did not (pi was killed)."""
    try:
        for container in host.containers(LABEL_SESSION, session):
            host.remove(container.id)
    except WriterpoolError as exc:
        log.warning("a read-only session's container was not removed: %s", exc.code)


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
    """Remove the keys a killed server left in writers' agent directories as the
    controller rendered them (`WriterRecord.rendered_agent`: on this machine the one its
    containers mount; a host over SSH never receives a key), and its proxies' sockets;
    returns how many. A writer whose lease is held (a live session elsewhere, or an
    operator command) is left alone: its lease is dropped by the kernel only when its
    holder dies."""
    if not paths.writers_dir.is_dir():
        return 0
    removed = 0
    for writer_dir in sorted(paths.writers_dir.iterdir()):
        record = paths.writer_record(writer_dir.name)
        agent_dir, egress_dir = record.rendered_agent, record.egress
        if writer_dir.is_symlink() or not agent_dir.is_dir():
            continue
        # Keyed on the socket too: a server killed after its proxy listened but before
        # the token was written left a socket and no credential.
        if not holds_credential(agent_dir) and not _holds_socket(egress_dir):
            continue
        lease = Lease(writer_dir)
        try:
            lease.acquire(wait=0)
        except WriterpoolError:
            continue
        try:
            remove_credentials(agent_dir)
            remove_stale_egress(egress_dir)
        finally:
            lease.release()
        removed += 1
    if removed:
        log.info("removed the credentials of %d writer session(s) of a stopped server", removed)
    return removed
