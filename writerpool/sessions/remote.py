"""A coding session on a writer whose host is reached over SSH.

The session's container runs on that host with the writer's storage there: its clone
and agent directory are named volumes of the host (the clone's `.git` guards are bind
mounts of the clone volume's own directory on the host), the agent directory is rendered
here and streamed into the agent volume by a throwaway container there, and the
session's provider proxy stays on this machine, its socket forwarded to the host for this
session only. Nothing of this machine is mounted into a container on the host; the
provider's key never leaves this machine.
"""

from __future__ import annotations

import contextlib
import io
import logging
import secrets
import tarfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from writerpool.agent.environment import EGRESS_DIR, EGRESS_SOCKET
from writerpool.config.network import network_info
from writerpool.errors import WriterpoolError
from writerpool.pool.container import AGENT_DIR
from writerpool.runtime.remote import RemotePodman
from writerpool.runtime.spec import LABEL_ROLE, LABEL_WRITER, ContainerSpec, Mount, VolumeMount
from writerpool.runtime.volumes import volume_name
from writerpool.sessions.turns import Snapshot

log = logging.getLogger(__name__)

# How often a remote session's connection is checked between Podman calls.
WATCH_SECONDS = 1.0
AGENT_PUSH_SECONDS = 60.0
# The agent directory holds a few small rendered files.
AGENT_DIR_CAP = 1024 * 1024
HOST_LOST_ERROR = (
    "writer_host_unreachable: the connection to the writer's host was lost; the work stays "
    "on the host, the writer is released; close the session"
)
# Empties the agent volume and unpacks the rendered directory from stdin into it.
_UNPACK = "find /pi/agent -mindepth 1 -delete && tar -x -f - -C /pi/agent --no-same-owner"


def check_supported(host: str, network: str, allow: tuple[str, ...] | None) -> None:
    """A remote session reaches its provider only through the forwarded proxy (or not at
    all): an open network would need the key on the host, an allowlist its CA there."""
    info = network_info(network)
    if allow or not info.limited:
        raise WriterpoolError(
            "remote_session_unsupported",
            f"a session on host {host} needs the writer's network to be provider or none, "
            "without an allowlist: the provider's key stays on this machine",
        )


def push_agent_dir(remote: RemotePodman, writer: str, image_id: str, agent_dir: Path) -> None:
    """Replace the writer's agent volume on its host with the directory rendered here."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(agent_dir, arcname=".")
    data = buffer.getvalue()
    if len(data) > AGENT_DIR_CAP:
        raise WriterpoolError("session_start_failed", "the rendered agent directory is too large")
    spec = ContainerSpec(
        image_id=image_id,
        name=f"writerpool-{writer}-agent-{secrets.token_hex(4)}",
        labels={LABEL_WRITER: writer, LABEL_ROLE: "agent"},
        volumes=(VolumeMount(volume=volume_name(writer, "agent"), target=AGENT_DIR),),
        workdir="/tmp",
    )
    done = remote.run(spec, ["sh", "-ec", _UNPACK], timeout=AGENT_PUSH_SECONDS, input=data)
    if done.returncode != 0:
        log.warning("agent directory of %s not written: %s", writer, done.stderr[-500:])
        raise WriterpoolError(
            "session_start_failed", f"the agent directory could not be written on {remote.name}"
        )


def _volume_root(remote: RemotePodman, writer: str, part: str) -> PurePosixPath:
    name = volume_name(writer, part)
    found = remote.cli(["volume", "inspect", "--format", "{{.Mountpoint}}", name], timeout=30)
    root = found.out.strip()
    if not root.startswith("/") or any(c in root for c in ",\n:"):
        raise WriterpoolError(
            "session_start_failed", f"the {part} volume of {writer} has no usable mount point"
        )
    return PurePosixPath(root)


def remote_spec(
    remote: RemotePodman, spec: ContainerSpec, writer: str, egress: PurePosixPath | None
) -> ContainerSpec:
    """The writer's session container (pool/container.py writer_spec) as its host runs it:
    each mount of the writer's storage becomes that host's, the proxy's socket the one
    forwarded for the session."""
    clone_root = _volume_root(remote, writer, "clone")
    binds: list[Mount] = []
    volumes: list[VolumeMount] = []
    for mount in spec.mounts:  # bounded by writer_spec's mounts: seven at most
        target, ro = mount.target, mount.read_only
        if target == "/work":
            volumes.append(VolumeMount(volume=volume_name(writer, "clone"), target=target))
        elif target.startswith("/work/"):
            # The guards on .git: paths inside the clone volume, on the host itself.
            inside = clone_root / target.removeprefix("/work/")
            binds.append(Mount(source=Path(str(inside)), target=target, read_only=ro))
        elif target == AGENT_DIR:
            volumes.append(VolumeMount(volume=volume_name(writer, "agent"), target=target,
                                       read_only=True))  # fmt: skip
        elif target == EGRESS_DIR and egress is not None:
            binds.append(Mount(source=Path(str(egress)), target=f"{EGRESS_DIR}/{EGRESS_SOCKET}",
                               read_only=True))  # fmt: skip
        elif target.startswith("/pi/"):
            volumes.append(VolumeMount(volume=volume_name(writer, "cache"), target=target))
        else:
            raise WriterpoolError("session_start_failed", f"no remote form of mount {target}")
    return spec.model_copy(update={"mounts": tuple(binds), "volumes": tuple(volumes)})


def lost(agent: Any, release: Any) -> None:
    """The host is gone: pi's attachment ends (its turn with it), the writer is released."""
    try:
        agent.close(5.0)
    finally:
        release()


@dataclass
class HostWatch:
    """Watches a remote session's connection: once it is lost, the writer is released
    (pool/sessions.py WriterSlot.release: its lease freed, its work left on the host) and
    the session's failed turn says why."""

    remote: RemotePodman
    release: Any  # Callable[[], object]: the writer's release
    lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="host-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Bounded by the session: ends when it stops or its connection is lost.
        while not self._stop.wait(WATCH_SECONDS):
            if self.remote.connected():
                continue
            self.lost = True
            log.warning("host %s lost during a session; its writer is released", self.remote.name)
            with contextlib.suppress(Exception):
                self.release()
            return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=WATCH_SECONDS * 5)


class RemoteAgent:
    """pi attached over the host's connection: its turns end with the host's error when
    that connection is lost, instead of a bare exit."""

    def __init__(self, agent: Any, watch: HostWatch) -> None:
        self._agent = agent
        self._watch = watch

    @property
    def alive(self) -> bool:
        return bool(self._agent.alive)

    def _why(self, snap: Snapshot) -> Snapshot:
        if snap.status not in ("failed", "aborted") or not self._watch.lost:
            return snap
        updated: Snapshot = replace(snap, status="failed", error=HOST_LOST_ERROR)  # type: ignore[type-var]
        return updated

    def prompt(self, message: str) -> str:
        return str(self._agent.prompt(message))

    def abort(self) -> None:
        self._agent.abort()

    def turn(self, turn_id: str) -> Snapshot:
        return self._why(self._agent.turn(turn_id))

    def wait(self, turn_id: str, timeout: float) -> Snapshot:
        return self._why(self._agent.wait(turn_id, timeout))

    def turns(self) -> list[Snapshot]:
        return [self._why(snap) for snap in self._agent.turns()]

    def close(self, timeout: float) -> None:
        self._agent.close(timeout)

    def __getattr__(self, name: str) -> Any:
        # What else a session asks of pi (its stderr tail, its pid) is the agent's own.
        return getattr(self._agent, name)
