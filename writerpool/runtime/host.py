"""The seam a writer's host sits behind (docs/scale-out.md): everything writerpool asks of
the machine that runs a writer's containers and keeps its storage, and the typed `Writer`
value that names a writer, its host and its record on the controller.

The pool, doctor and the session launcher see only `WriterHost`: no code outside
runtime/ asks which kind of host it has. runtime/local.py `LocalPodman` is this machine's
Podman, runtime/remote.py `RemotePodman` a Podman host over SSH (both on the engine of
runtime/podman.py), and runtime/hosts.py the one place that makes a host.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, NamedTuple, Protocol

from writerpool.config.hosts import LOCAL as LOCAL  # noqa: PLC0414 - the reserved name
from writerpool.config.paths import Paths, WriterRecord
from writerpool.proc import Completed
from writerpool.runtime.spec import ContainerSpec, Mount, VolumeMount
from writerpool.state.controller import controller_id

# A writer's storage on its host: what its containers mount (by part), and scratch names
# that provisioning and reset once staged beside them (a removal still clears them).
STORAGE = ("clone", "agent", "cache")
SCRATCH = ("clone.new", "provision.bundle", "reset-base")

# Inside a writer's container: the directory of the session's proxy sockets, and the
# provider proxy's socket in it (agent/environment.py points pi's forwarder there).
EGRESS_DIR = "/pi/egress"
EGRESS_SOCKET = "proxy.sock"


@dataclass(frozen=True)
class ContainerRef:
    id: str
    name: str
    state: str
    controller: str  # its LABEL_CONTROLLER; empty for one an older writerpool made
    age: float | None = None  # a leftover's seconds since it was made, on its host's clock


@dataclass(frozen=True)
class EngineFacts:
    host: str
    podman_version: str
    # Rootless limits need the unified cgroup v2 hierarchy with delegated controllers.
    limits: bool
    rootless: bool


class Canary(NamedTuple):
    """A canary file planted in the home of a host's account, which no writer may read."""

    home: str
    file: str
    directory: str


@dataclass(frozen=True)
class Writer:
    """A writer by name on its host. `record` is the controller's directory of it
    (config/paths.py `WriterRecord`: its state, lease, verdicts, collected bundles, a
    session's proxy sockets, whose processes run on the controller, and the rendering of
    its agent directory). Its storage (clone, agent directory, cache) is its host's:
    reached only through `WriterHost` (mounts, presence, creation, removal, `agent_dir`),
    never by a path here. `host` and `name` are the handle a host finds that storage by."""

    name: str
    host: str
    record: WriterRecord
    controller: str  # the id of the state that owns it (state/controller.py)

    @property
    def proxy_socket(self) -> Path:
        """The session's provider proxy listens here (egress/sockets.py makes it)."""
        return self.record.egress / EGRESS_SOCKET

    def owns(self, controller: str, *, adopt: bool = True) -> bool:
        """Whether a container or volume carrying `controller` (its LABEL_CONTROLLER) is
        this state's to take; with `adopt`, one with none too (an older writerpool's)."""
        return controller == self.controller or (adopt and controller == "")


def writer_at(paths: Paths, name: str, host: str = LOCAL) -> Writer:
    """The writer `name` on `host`."""
    return Writer(name=name, host=host, record=paths.writer_record(name),
                  controller=controller_id(paths))  # fmt: skip


def inside(sub_path: str) -> tuple[str, ...]:
    """The names of a path inside a writer's storage part (storage_mount's `sub_path`):
    relative, plain, never leaving the part."""
    parts = PurePosixPath(sub_path).parts
    if sub_path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a path inside a storage part: {sub_path!r}")
    return parts


class WriterHost(Protocol):
    """A machine that runs writers' containers and keeps their storage."""

    @property
    def name(self) -> str: ...

    # -- containers ----------------------------------------------------------------

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

    def leftovers(self) -> list[ContainerRef]:
        """Containers Podman's storage holds and Podman itself does not know (state
        "storage", no labels): a Podman client killed while it made one leaves it, and
        its name stays taken until it is removed."""
        ...

    def remove(self, container_id: str) -> None:
        """Stop at once and remove (a leftover too); a container already gone is no error."""
        ...

    # -- a writer's storage --------------------------------------------------------

    def storage_mount(
        self, writer: Writer, part: str, target: str, *, sub_path: str = "",
        read_only: bool = False,
    ) -> Mount | VolumeMount:  # fmt: skip
        """The writer's storage `part` (one of STORAGE), or the path `sub_path` inside
        it, as a mount at `target` of a container on this host: what the host keeps,
        never a path of the controller's."""
        ...

    def storage_present(self, writer: Writer, part: str) -> bool:
        """Whether the host keeps the writer's storage `part` (one of STORAGE): a clone
        that is gone holds nothing to lose; one that is there is judged by inspection."""
        ...

    def create_storage(self, writer: Writer, *, cache: bool, adopt: bool) -> None:
        """Make the writer's storage (private to the host's account); idempotent.
        `adopt`: storage found there without a state's id (an older writerpool made it)
        is this writer's (a writer this state holds already), else writer_name_taken (a
        writer it provisions: the storage may be another state's)."""
        ...

    def remove_storage(self, writer: Writer) -> None:
        """Remove every storage handle and scratch of the writer; the caller holds its
        lease and has fenced its containers. Any tree an agent made goes."""
        ...

    def agent_dir(self, writer: Writer) -> AbstractContextManager[Path]:
        """The writer's agent directory, rendered during the block into
        `writer.record.rendered_agent`, which this yields; when the block ends without an error,
        that is what the writer's containers mount (read-only) as their agent directory.
        The lease is held: nothing else writes it meanwhile."""
        ...

    # -- what a writer's session reaches -------------------------------------------

    def egress_mount(self, writer: Writer) -> Mount:
        """How a container of the writer reaches its session's provider proxy (whose
        socket is `writer.proxy_socket` on the controller): the mount at EGRESS_DIR its
        spec carries, the same for every session and acceptance of the writer."""
        ...

    def egress_endpoint(self, writer: Writer) -> AbstractContextManager[Mount]:
        """Make `egress_mount(writer)` lead to the controller's proxy socket for the
        block; yields that mount."""
        ...

    def forwarded_socket(self, local: Path, name: str) -> AbstractContextManager[str]:
        """The controller's Unix socket `local` answering on this host for the block, at
        the path it yields (`name` names it there; one holder at a time)."""
        ...

    def check_network(self, network: str, allow: tuple[str, ...] | None) -> None:
        """Refuse (remote_session_unsupported) a network kind, or an allowlist, this host
        cannot give a writer's sessions."""
        ...

    def connected(self) -> bool:
        """Whether the host is reachable now (a session's watch asks this)."""
        ...

    # -- what the acceptance harness is checked against ----------------------------

    def planted_canary(self) -> AbstractContextManager[Canary]:
        """A private canary file in the home of the host's account for the block; it goes
        with the process that planted it, killed too."""
        ...

    def loopback_listener(self) -> AbstractContextManager[int]:
        """A port listening on the host's own loopback for the block."""
        ...

    def run_uncontained(self, program: Path, env: dict[str, str]) -> bytes:
        """Run the harness `program` (a file of the controller) uncontained as the host's
        account, in a fresh private work directory (WRITERPOOL_HARNESS_WORK); its stdout,
        empty when it could not run."""
        ...

    # -- the engine ----------------------------------------------------------------

    def ensure_image(self, image_id: str) -> None:
        """Make sure the image is present by ID, or raise image_unavailable."""
        ...

    def facts(self) -> EngineFacts: ...
