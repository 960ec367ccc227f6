"""The seam a writer's host sits behind (docs/scale-out.md): the few things writerpool
asks of the machine that runs a writer's containers and keeps its storage, and the
typed `Writer` value that names a writer, its host and its storage there.

The pool, doctor and the session launcher see only `WriterHost`; runtime/podman.py is the
one implementation (a Podman engine reached over a connection; the local one is an
instance of it) and runtime/hosts.py the one place that makes a host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from writerpool.config.paths import Paths
from writerpool.proc import Completed
from writerpool.runtime.spec import ContainerSpec, Mount, VolumeMount

LOCAL = "local"

# Under a writer's storage root on its host: what containers mount, and scratch names
# that provisioning and reset once staged beside them (a removal still clears them).
STORAGE = ("clone", "agent", "cache", "collections")
SCRATCH = ("clone.new", "provision.bundle", "reset-base")


@dataclass(frozen=True)
class ContainerRef:
    id: str
    name: str
    state: str


@dataclass(frozen=True)
class EngineFacts:
    host: str
    podman_version: str
    # Rootless limits need the unified cgroup v2 hierarchy with delegated controllers.
    limits: bool
    rootless: bool


@dataclass(frozen=True)
class Writer:
    """A writer by name on its host. `record` is the controller's directory of it (state,
    lease, a session's proxy sockets); `storage` is the writer's root on its host, which
    only that host's containers and the host's storage operations touch."""

    name: str
    host: str
    record: Path
    storage: Path

    @property
    def clone(self) -> Path:
        return self.storage / "clone"

    @property
    def agent(self) -> Path:
        return self.storage / "agent"

    @property
    def cache(self) -> Path:
        return self.storage / "cache"

    @property
    def collections(self) -> Path:
        return self.storage / "collections"

    @property
    def egress(self) -> Path:
        # On the controller: the session's proxy sockets are its processes'.
        return self.record / "egress"

    @property
    def failure_file(self) -> Path:
        return self.record / "acceptance-failure.json"


def writer_at(paths: Paths, name: str, host: str = LOCAL) -> Writer:
    """The writer `name` on `host`. On the local host its storage root is its record."""
    record = paths.writer_dir(name)
    return Writer(name=name, host=host, record=record, storage=record)


class WriterHost(Protocol):
    """A machine that runs writers' containers and keeps their storage."""

    @property
    def name(self) -> str: ...

    def run(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float = 120.0,
        input: bytes | None = None,
    ) -> Completed:
        """Run a disposable container to completion: `input` on its stdin, its stdout and
        stderr captured."""
        ...

    def stream(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float,
        input: bytes | IO[bytes],
        consume: Callable[[IO[bytes]], None],
    ) -> Completed:
        """Run a disposable container to completion, `input` on its stdin, while `consume`
        reads its stdout as it comes (a bundle: too large to hold in memory); the
        container is removed when `consume` raises. Stdout is not in the Completed."""
        ...

    def attach_argv(self, spec: ContainerSpec, command: list[str]) -> list[str]:
        """The argv of a disposable container whose stdio the caller attaches (a session)."""
        ...

    def attach_env(self) -> dict[str, str]:
        """The environment that argv runs with."""
        ...

    def containers(self, label: str, value: str) -> list[ContainerRef]:
        """Every container (any state) carrying label=value."""
        ...

    def remove(self, container_id: str) -> None:
        """Stop at once and remove; a container already gone is no error."""
        ...

    def storage_mount(
        self, writer: Writer, part: str, target: str, *, read_only: bool = False
    ) -> Mount | VolumeMount:
        """The writer's storage `part` (one of STORAGE) as a mount of a container on this
        host: what the host keeps, never a path of the controller's."""
        ...

    def storage_present(self, writer: Writer, part: str) -> bool:
        """Whether the host keeps the writer's storage `part` (one of STORAGE): a clone
        that is gone holds nothing to lose; one that is there is judged by inspection."""
        ...

    def create_storage(self, writer: Writer, *, cache: bool) -> None:
        """Make the writer's storage (private to the host's account); idempotent."""
        ...

    def remove_storage(self, writer: Writer) -> None:
        """Remove every storage handle and scratch of the writer; the caller holds its
        lease and has fenced its containers. Any tree an agent made goes."""
        ...

    def ensure_image(self, image_id: str) -> None:
        """Make sure the image is present by ID, or raise image_unavailable."""
        ...

    def facts(self) -> EngineFacts: ...
