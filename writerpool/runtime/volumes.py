"""A writer's storage on a host over SSH (runtime/remote.py): named volumes of that host,
made, listed and removed through its Podman, so nothing of the controller is mounted and
nothing but the host's own containers and account touch the files. A path inside a volume
is bound by its directory on the host (Podman 4.3 mounts no volume sub-path); the agent
directory is written into its volume's directory by the host's account itself, over the
connection's master (no container of its own)."""

from __future__ import annotations

import io
import logging
import re
import tarfile
from pathlib import Path, PurePosixPath

from writerpool.errors import WriterpoolError
from writerpool.runtime.host import Writer
from writerpool.runtime.podman import PodmanEngine
from writerpool.runtime.spec import LABEL_CONTROLLER, LABEL_WRITER
from writerpool.runtime.ssh import SshRoute
from writerpool.state.controller import name_taken

log = logging.getLogger(__name__)

STORAGE = ("clone", "agent")
_WRITER = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,80}$")
_MOUNTPOINT = re.compile(r"^/[A-Za-z0-9_./@+-]{1,4000}$")
AGENT_PUSH_SECONDS = 60.0
# The agent directory holds a few small rendered files.
AGENT_DIR_CAP = 1024 * 1024
# Run by the host's account: empties the agent volume's directory ($1, which only this
# writes: sessions mount it read-only) and unpacks the rendered directory from stdin.
_UNPACK = 'cd -- "$1" && find . -mindepth 1 -delete && tar -x -f - --no-same-owner'


def volume_name(writer: str, part: str) -> str:
    if not _WRITER.fullmatch(writer) or part not in (*STORAGE, "cache"):
        raise ValueError("not a writer name or storage part")
    return f"writerpool-{writer}-{part}"


def create_volumes(
    podman: PodmanEngine, writer: Writer, *, cache: bool, adopt: bool
) -> dict[str, str]:
    """The writer's volumes (part -> volume name), made where missing; idempotent.
    writer_name_taken when another state's writer of that name has volumes there, or
    (unless `adopt`) when one carries no state's id."""
    parts = (*STORAGE, *(("cache",) if cache else ()))
    have = writer_volumes(podman, writer, adopt=adopt)
    made = {}
    for part in parts:  # bounded by STORAGE and cache: three at most
        name = volume_name(writer.name, part)
        if name not in have:
            podman.cli(["volume", "create", "--label", f"{LABEL_WRITER}={writer.name}",
                        "--label", f"{LABEL_CONTROLLER}={writer.controller}", name],
                       timeout=60)  # fmt: skip
        made[part] = name
    return made


def writer_volumes(podman: PodmanEngine, writer: Writer, *, adopt: bool = True) -> list[str]:
    """Every volume carrying the writer's label on that host, each this state's;
    writer_name_taken when one is another state's, or carries no state's id (an older
    writerpool made it) and `adopt` is false."""
    label = f'{{{{index .Labels "{LABEL_CONTROLLER}"}}}}'
    found = podman.cli(["volume", "ls", "--filter", f"label={LABEL_WRITER}={writer.name}",
                        "--format", "{{.Name}} " + label], timeout=60)  # fmt: skip
    names = []
    for line in found.out.splitlines():  # bounded by the writer's volumes: three at most
        name, _, controller = line.strip().partition(" ")
        controller = "" if controller.strip() == "<no value>" else controller.strip()
        if not writer.owns(controller, adopt=adopt):
            raise name_taken(f"volume {name}", writer.name, writer.host,
                             controller or "none: an older writerpool made it",
                             writer.controller)  # fmt: skip
        if name.startswith("writerpool-"):
            names.append(name)
    return names


def remove_volumes(podman: PodmanEngine, writer: Writer) -> int:
    """Remove the writer's volumes (the caller holds its lease and fenced its containers);
    the number removed. Whatever an agent made in them goes with them."""
    names = writer_volumes(podman, writer)
    for name in names:  # bounded by the writer's volumes: four at most
        done = podman.cli(["volume", "rm", "--force", "--", name], timeout=120, check=False)
        if done.returncode != 0 and podman.cli(["volume", "exists", name], timeout=30,
                                               check=False).returncode == 0:  # fmt: skip
            raise WriterpoolError(
                "command_failed", f"the volume of {writer.name} cannot be removed"
            )
    return len(names)


def volume_root(podman: PodmanEngine, writer: str, part: str) -> PurePosixPath:
    """The directory on the host that holds the writer's volume `part`."""
    name = volume_name(writer, part)
    found = podman.cli(["volume", "inspect", "--format", "{{.Mountpoint}}", name], timeout=30)
    root = found.out.strip()
    # The host's answer becomes a bind mount's source there: one plain, normal path.
    if not _MOUNTPOINT.fullmatch(root) or ".." in PurePosixPath(root).parts:
        raise WriterpoolError(
            "command_failed", f"the {part} volume of {writer} has no usable mount point"
        )
    return PurePosixPath(root)


def packed_agent_dir(rendered: Path) -> bytes:
    """The directory `rendered` of the controller as a tar, refused past AGENT_DIR_CAP
    before the host is asked anything."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(rendered, arcname=".")
    data = buffer.getvalue()
    if len(data) > AGENT_DIR_CAP:
        raise WriterpoolError("session_start_failed", "the rendered agent directory is too large")
    return data


def unpack_agent_dir(ssh: SshRoute, root: PurePosixPath, writer: str, packed: bytes) -> None:
    """Replace the agent volume's content (its directory `root` on the host) with the
    packed directory, as the host's account."""
    done = ssh.exec(["sh", "-ec", _UNPACK, "sh", str(root)], timeout=AGENT_PUSH_SECONDS,
                    input=packed)  # fmt: skip
    if done.returncode != 0:
        log.warning("agent directory of %s not written: %s", writer, done.stderr[-500:])
        raise WriterpoolError(
            "session_start_failed", f"the agent directory could not be written on {ssh.name}"
        )
