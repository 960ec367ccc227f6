"""This machine's Podman as a writer host (`local`): the controller is the host.

A writer's storage is directories in its record on this machine (the layout on disk:
$XDG_STATE_HOME/writerpool/writers/NAME/{clone,agent,cache}), mounted by path; so its
agent directory is rendered in place, a session's proxy sockets are mounted from the
directory their processes made them in, and the harness's canary, loopback listener and
uncontained run are this machine's own (runtime/probes.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from writerpool.atomic import ensure_private_dir
from writerpool.errors import WriterpoolError
from writerpool.runtime import probes
from writerpool.runtime.host import (
    EGRESS_DIR,
    LOCAL,
    SCRATCH,
    STORAGE,
    Canary,
    EngineFacts,
    Writer,
    inside,
)
from writerpool.runtime.image import image_exists
from writerpool.runtime.podman import PodmanEngine
from writerpool.runtime.spec import Mount, VolumeMount
from writerpool.tree_removal import remove_path

# Rootless limits need the unified cgroup v2 hierarchy with delegated controllers.
CGROUP_CONTROLLERS = Path("/sys/fs/cgroup/cgroup.controllers")


class LocalPodman(PodmanEngine):
    """The `WriterHost` of this account's Podman."""

    def __init__(self, binary: str | None = None, socket_path: Path | None = None) -> None:
        super().__init__(LOCAL, binary, socket_path)

    # -- the engine --------------------------------------------------------
    def ensure_image(self, image_id: str) -> None:
        # The image is built on this host by `writerpool image build`: present or not.
        if not image_exists(image_id):
            raise WriterpoolError(
                "image_unavailable",
                f"the image {image_id[:12]} is not in the storage of host {self.name}; "
                "run `writerpool image build`",
            )

    def facts(self) -> EngineFacts:
        return EngineFacts(
            host=self.name,
            podman_version=self.version(),
            limits=CGROUP_CONTROLLERS.exists(),
            rootless=os.getuid() != 0,
        )

    def connected(self) -> bool:
        return True  # this machine: no connection to lose

    # -- a writer's storage ------------------------------------------------
    def storage_path(self, writer: Writer, part: str) -> Path:
        """The directory of the writer's storage `part` on this machine, in its record
        (its agent directory is `writer.record.rendered_agent`)."""
        if part not in STORAGE:
            raise ValueError(f"not a storage part: {part}")
        return writer.record.path / part

    def storage_mount(
        self, writer: Writer, part: str, target: str, *, sub_path: str = "",
        read_only: bool = False,
    ) -> Mount | VolumeMount:  # fmt: skip
        source = self.storage_path(writer, part).joinpath(*inside(sub_path))
        return Mount(source=source, target=target, read_only=read_only)

    def storage_present(self, writer: Writer, part: str) -> bool:
        return self.storage_path(writer, part).exists()

    def create_storage(self, writer: Writer, *, cache: bool, adopt: bool) -> None:
        del adopt  # in this state's own directory: no other state's storage can be there
        ensure_private_dir(writer.record.path)
        for part in ("clone", "agent", *(("cache",) if cache else ())):  # three at most
            ensure_private_dir(self.storage_path(writer, part))

    def remove_storage(self, writer: Writer) -> None:
        # The removal of agent-made trees the throwaway container runs too (an identical copy).
        for name in (*STORAGE, *SCRATCH):
            remove_path(writer.record.path / name)

    @contextlib.contextmanager
    def agent_dir(self, writer: Writer) -> Iterator[Path]:
        # The controller's rendering is the agent storage itself (the same directory of
        # the record), which containers mount: rendered in place, nothing to write after.
        yield writer.record.rendered_agent

    # -- what a writer's session reaches -----------------------------------
    def egress_mount(self, writer: Writer) -> Mount:
        # Read-only: the agent may connect to the proxies' sockets, never replace one.
        return Mount(source=writer.record.egress, target=EGRESS_DIR, read_only=True)

    @contextlib.contextmanager
    def egress_endpoint(self, writer: Writer) -> Iterator[Mount]:
        # The proxies' processes make their sockets in that very directory.
        yield self.egress_mount(writer)

    @contextlib.contextmanager
    def forwarded_socket(self, local: Path, name: str) -> Iterator[str]:
        yield str(local)

    def check_network(self, network: str, allow: tuple[str, ...] | None) -> None:
        return None  # every network kind, with or without an allowlist

    # -- what the acceptance harness is checked against --------------------
    def planted_canary(self) -> AbstractContextManager[Canary]:
        return probes.canary_here()

    def loopback_listener(self) -> AbstractContextManager[int]:
        return probes.loopback_here()

    def run_uncontained(self, program: Path, env: dict[str, str]) -> bytes:
        return probes.run_here(program, env)
