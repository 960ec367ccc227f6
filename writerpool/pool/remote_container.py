"""A writer's container on a host over SSH, from the spec a local writer's would have:
its storage the host's (named volumes; the clone's `.git` guards bind mounts of paths
inside the clone volume on that host), its agent directory rendered on the controller and
written into the agent volume's directory by the host's account itself (over the
connection's master: no container of its own), its proxy socket the one forwarded for it.
Nothing of the controller is mounted into it; the agent volume is read-only to it."""

from __future__ import annotations

import io
import logging
import re
import tarfile
from pathlib import Path, PurePosixPath

from writerpool.agent.environment import EGRESS_DIR, EGRESS_SOCKET
from writerpool.errors import WriterpoolError
from writerpool.pool.container import AGENT_DIR
from writerpool.runtime.remote import RemotePodman
from writerpool.runtime.spec import ContainerSpec, Mount, VolumeMount
from writerpool.runtime.volumes import volume_name

log = logging.getLogger(__name__)

AGENT_PUSH_SECONDS = 60.0
# The agent directory holds a few small rendered files.
AGENT_DIR_CAP = 1024 * 1024
_MOUNTPOINT = re.compile(r"^/[A-Za-z0-9_./@+-]{1,4000}$")
# Run by the host's account: empties the agent volume's directory ($1, which only this
# writes: sessions mount it read-only) and unpacks the rendered directory from stdin.
_UNPACK = 'cd -- "$1" && find . -mindepth 1 -delete && tar -x -f - --no-same-owner'


def push_agent_dir(remote: RemotePodman, writer: str, agent_dir: Path) -> None:
    """Replace the writer's agent volume on its host with the directory rendered here."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(agent_dir, arcname=".")
    data = buffer.getvalue()
    if len(data) > AGENT_DIR_CAP:
        raise WriterpoolError("session_start_failed", "the rendered agent directory is too large")
    root = _volume_root(remote, writer, "agent")
    done = remote.host.exec(["sh", "-ec", _UNPACK, "sh", str(root)],
                            timeout=AGENT_PUSH_SECONDS, input=data)  # fmt: skip
    if done.returncode != 0:
        log.warning("agent directory of %s not written: %s", writer, done.stderr[-500:])
        raise WriterpoolError(
            "session_start_failed", f"the agent directory could not be written on {remote.name}"
        )


def _volume_root(remote: RemotePodman, writer: str, part: str) -> PurePosixPath:
    name = volume_name(writer, part)
    found = remote.cli(["volume", "inspect", "--format", "{{.Mountpoint}}", name], timeout=30)
    root = found.out.strip()
    # The host's answer becomes a bind mount's source there: one plain, normal path.
    if not _MOUNTPOINT.fullmatch(root) or ".." in PurePosixPath(root).parts:
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
