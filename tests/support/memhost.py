"""A writer host kept in memory: a real `WriterHost` (runtime/host.py) for the logic above
the seam, with no Podman and no SSH. Its storage is named volumes that exist only in its
memory (a path inside one: under `volume_dir`, as on a host over SSH), its forwarded
sockets are paths under `socket_dir`, and the agent directory it receives is kept as
bytes. It runs no container: `run` and `stream` keep the spec and answer that nothing
ran (exit 125, as Podman's own failures); the containers it lists are those a test
planted (`plant`, as if a session had started one, or a killed client had left one),
until they are removed."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from writerpool.config.network import check_remote_network
from writerpool.errors import WriterpoolError
from writerpool.proc import Completed
from writerpool.runtime.host import (
    EGRESS_DIR,
    STORAGE,
    Canary,
    ContainerRef,
    EngineFacts,
    Writer,
    inside,
)
from writerpool.runtime.spec import LABEL_CONTROLLER, ContainerSpec, Mount, VolumeMount

NOTHING_RAN = b"no container runs on a host kept in memory"


class MemoryHost:
    """Host `name`, holding the images `images`; `remote_rules`: it refuses the networks
    a host over SSH refuses (runtime/remote.py check_network)."""

    def __init__(
        self,
        name: str = "mem",
        *,
        images: tuple[str, ...] = (),
        volume_dir: str = "/srv/volumes",
        socket_dir: str = "/run/user/1000/writerpool",
        podman_version: str = "4.3.1",
        remote_rules: bool = True,
    ) -> None:
        self._name = name
        self.images = set(images)
        self.volume_dir = PurePosixPath(volume_dir)
        self.socket_dir = PurePosixPath(socket_dir)
        self.podman_version = podman_version
        self.remote_rules = remote_rules
        self.volumes: set[str] = set()
        self.agent_files: dict[str, dict[str, bytes]] = {}  # writer -> what it received
        self.ran: list[tuple[ContainerSpec, list[str]]] = []
        self.forwarded: list[str] = []  # sockets forwarded, in order
        self.planted: dict[str, tuple[ContainerRef, dict[str, str]]] = {}  # id -> ref, labels
        self.alive = True

    @property
    def name(self) -> str:
        return self._name

    # -- containers: kept, never run ---------------------------------------------
    def run(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float = 120.0,
        input: bytes | None = None,
    ) -> Completed:
        self.ran.append((spec, command))
        return Completed(self.attach_argv(spec, command), 125, b"", NOTHING_RAN)

    def stream(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float,
        input: bytes | IO[bytes],
        consume: Callable[[IO[bytes]], None],
    ) -> Completed:
        return self.run(spec, command, timeout=timeout)

    def attach_argv(self, spec: ContainerSpec, command: list[str]) -> list[str]:
        return ["podman", *spec.run_argv(command, interactive=True)]

    def attach_env(self) -> dict[str, str]:
        return {}

    def plant(
        self, spec: ContainerSpec, *, left: bool = False, age: float | None = 3600.0
    ) -> ContainerRef:
        """A running container of `spec` (its name and labels), as a session's would be;
        `left`: only its name, held by the storage (a leftover of a killed client), made
        `age` seconds ago."""
        if left:
            ref = ContainerRef(secrets.token_hex(32), spec.name, "storage", "", age)
            self.planted[ref.id] = (ref, {})
            return ref
        ref = ContainerRef(secrets.token_hex(32), spec.name, "running",
                           spec.labels.get(LABEL_CONTROLLER, ""))  # fmt: skip
        self.planted[ref.id] = (ref, dict(spec.labels))
        return ref

    def containers(self, label: str, value: str) -> list[ContainerRef]:
        return [ref for ref, labels in self.planted.values() if labels.get(label) == value]

    def leftovers(self) -> list[ContainerRef]:
        return [ref for ref, _ in self.planted.values() if ref.state == "storage"]

    def remove(self, container_id: str) -> None:
        self.planted.pop(container_id, None)

    # -- storage: names in memory ------------------------------------------------
    def _volume(self, writer: Writer, part: str) -> str:
        if part not in STORAGE:
            raise ValueError(f"not a storage part: {part}")
        return f"writerpool-{writer.name}-{part}"

    def storage_mount(
        self, writer: Writer, part: str, target: str, *, sub_path: str = "",
        read_only: bool = False,
    ) -> Mount | VolumeMount:  # fmt: skip
        volume = self._volume(writer, part)
        if not sub_path:
            return VolumeMount(volume=volume, target=target, read_only=read_only)
        source = self.volume_dir.joinpath(volume, "_data", *inside(sub_path))
        return Mount(source=Path(str(source)), target=target, read_only=read_only)

    def storage_present(self, writer: Writer, part: str) -> bool:
        return self._volume(writer, part) in self.volumes

    def create_storage(self, writer: Writer, *, cache: bool, adopt: bool) -> None:
        del adopt  # names in memory carry no state's id
        for part in ("clone", "agent", *(("cache",) if cache else ())):
            self.volumes.add(self._volume(writer, part))

    def remove_storage(self, writer: Writer) -> None:
        self.volumes -= {self._volume(writer, part) for part in STORAGE}
        self.agent_files.pop(writer.name, None)

    @contextlib.contextmanager
    def agent_dir(self, writer: Writer) -> Iterator[Path]:
        rendered = writer.record.rendered_agent
        rendered.mkdir(mode=0o700, parents=True, exist_ok=True)
        yield rendered
        self.agent_files[writer.name] = {
            str(p.relative_to(rendered)): p.read_bytes() for p in rendered.rglob("*") if p.is_file()
        }

    # -- egress: a forwarded socket named by the writer --------------------------
    def egress_mount(self, writer: Writer) -> Mount:
        source = Path(str(self.socket_dir / "egress" / writer.name))
        return Mount(source=source, target=EGRESS_DIR, read_only=True)

    @contextlib.contextmanager
    def egress_endpoint(self, writer: Writer) -> Iterator[Mount]:
        with self.forwarded_socket(writer.proxy_socket, writer.name):
            yield self.egress_mount(writer)

    @contextlib.contextmanager
    def forwarded_socket(self, local: Path, name: str) -> Iterator[str]:
        self.forwarded.append(name)
        yield str(self.socket_dir / f"{name}.sock")

    def check_network(self, network: str, allow: tuple[str, ...] | None) -> None:
        if self.remote_rules:
            check_remote_network(self.name, network, allow)

    def connected(self) -> bool:
        return self.alive

    # -- the harness's probes: pretend places on the pretend host ----------------
    @contextlib.contextmanager
    def planted_canary(self) -> Iterator[Canary]:
        directory = f"/home/{self.name}/.writerpool-canary-{secrets.token_hex(6)}"
        yield Canary(f"/home/{self.name}", f"{directory}/secret", directory)

    @contextlib.contextmanager
    def loopback_listener(self) -> Iterator[int]:
        yield 41999

    def run_uncontained(self, program: Path, env: dict[str, str]) -> bytes:
        return b""  # no report: a control here fails

    # -- the engine ----------------------------------------------------------------
    def ensure_image(self, image_id: str) -> None:
        if image_id not in self.images:
            raise WriterpoolError("image_unavailable", f"{image_id[:12]} is not on {self.name}")

    def facts(self) -> EngineFacts:
        return EngineFacts(self.name, self.podman_version, limits=True, rootless=True)
