"""A Podman host over SSH as a writer host: the same Podman engine (runtime/podman.py),
pointed at a forwarded API socket, with the writer's storage in that host's volumes.

The host's API socket is forwarded to a private socket of the controller for as long
as the connection is open; the API calls and the podman CLI (`--url unix://…`) both use it,
so every container operation of the engine works unchanged on the host. That forward's
ssh process is the connection's master: commands on the host and a session's socket
forward ride it (runtime/ssh.py). A writer's storage is named volumes there
(runtime/volumes.py); its agent directory is rendered on the controller and written into
its volume over the connection; a session's provider proxy stays on the controller, its
socket forwarded to a path named by the writer (its lease makes it the one user), so the
spec of every session and acceptance of the writer is the same; the harness's canary,
listener and uncontained run are the host's own (runtime/probes.py).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path, PurePosixPath
from typing import IO, TypeVar

from writerpool.atomic import ensure_private_dir
from writerpool.config.hosts import HostConfig
from writerpool.config.network import check_remote_network
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, Completed, OutputTooLarge
from writerpool.runtime import probes, volumes
from writerpool.runtime.host import (
    EGRESS_DIR,
    EGRESS_SOCKET,
    Canary,
    EngineFacts,
    Writer,
    inside,
)
from writerpool.runtime.podman import (
    PodmanApiUnavailable,
    PodmanEngine,
    default_socket,
    socket_answers,
)
from writerpool.runtime.podman_api import pings
from writerpool.runtime.spec import ContainerSpec, Mount, VolumeMount
from writerpool.runtime.ssh import Forward, HostUnreachable, SshRoute

# A Podman service answers `_ping` at once; a slow link still gets a few seconds.
API_PING_SECONDS = 15.0
VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+~-]{0,63}$")
# On the host: the sockets' directory made, or found a directory (not a link) of the SSH
# user's own, and made private; else another account could swap a session's socket.
# Each directory given, in order: made 0700 if absent, then checked to be the SSH user's
# own (not a link) and made 0700.
_OWN_DIRECTORIES = (
    'for d in "$@"; do mkdir -p -m 0700 -- "$d" && [ ! -L "$d" ] && [ -O "$d" ] '
    '&& chmod 0700 -- "$d" || exit 1; done'
)
_T = TypeVar("_T")
# What the podman client prints of the host's answers (lists, inspections): a host that
# sends more is refused before the controller holds it.
CLI_OUTPUT_MAX = 16 * 1024 * 1024
# A forwarded socket's name on the host (a writer's, or the control's relay).
FORWARD_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")


class RemotePodman(PodmanEngine):
    """The `WriterHost` of Podman on `host`, through the forwarded socket `socket_path`."""

    def __init__(self, host: SshRoute, socket_path: Path, forward: Forward | None = None) -> None:
        super().__init__(name=host.name, socket_path=socket_path)
        self.host = host
        self.forward = forward
        self._facts: EngineFacts | None = None
        self._images: set[str] = set()  # seen present over this connection
        self._roots: dict[str, PurePosixPath] = {}  # volume -> its directory on the host

    def require_api(self) -> None:
        """Refuse a url whose socket is no answering Podman API service (a service not
        running, a wrong path) with its own code, before a command reads its silence."""
        if pings(self.socket_path, API_PING_SECONDS):
            return
        self.raise_if_gone(WriterpoolError("host_podman_unavailable", "no answer"))
        raise WriterpoolError(
            "host_podman_unavailable",
            f"host {self.host.name}: no Podman API service answers at its url's socket path; "
            "start it for the SSH user (`podman system service --time=0 unix://PATH`) or "
            f"correct hosts.{self.host.name}.url",
        )

    def connected(self) -> bool:
        alive = self.forward is None or self.forward.alive()
        return alive and socket_answers(self.socket_path)

    def url_args(self) -> list[str]:
        return ["--url", f"unix://{self.socket_path}"]

    def cli(
        self,
        args: Sequence[str],
        *,
        timeout: float = 120.0,
        input: bytes | None = None,
        check: bool = True,
        limit: int | None = CLI_OUTPUT_MAX,
    ) -> Completed:
        try:
            done = super().cli([*self.url_args(), *args], timeout=timeout, input=input,
                               check=check, limit=limit or CLI_OUTPUT_MAX)  # fmt: skip
        except OutputTooLarge as exc:
            raise WriterpoolError(
                "command_failed",
                f"host {self.name}'s Podman answered with over {CLI_OUTPUT_MAX} bytes",
            ) from exc
        except CommandFailed as exc:
            self.raise_if_gone(exc)
            raise
        if done.returncode == 125 and not self.connected():
            raise HostUnreachable(self.host.name, "the connection to its Podman was lost")
        return done

    def raise_if_gone(self, cause: BaseException) -> None:
        if not self.connected():
            raise HostUnreachable(
                self.host.name, "the connection to its Podman was lost"
            ) from cause

    def version(self) -> str:
        """The host's Podman (the server), not this machine's client."""
        found = self.cli(["version", "--format", "{{.Server.Version}}"], timeout=30)
        return found.out.strip()

    def attach_argv(self, spec: ContainerSpec, command: list[str]) -> list[str]:
        """The container run by the host's own podman over a channel of the master (a
        session's pi, a stream's data): its stdio crosses that channel alone, not Podman's
        remote attach through its API service as well, which cost about twice the local
        time for 50 MB even without SSH (docs/benchmarks.md). The argv is the same."""
        run = spec.run_argv(command, interactive=True)
        return self.host.command_argv([*self._host_env(), "podman", *run])

    def stream(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float,
        input: bytes | IO[bytes],
        consume: Callable[[IO[bytes]], None],
    ) -> Completed:
        # A stream cut short by a lost connection is the host's failure, not the data's.
        try:
            done = super().stream(spec, command, timeout=timeout, input=input, consume=consume)
        except WriterpoolError as exc:
            self.raise_if_gone(exc)
            raise
        if done.returncode in (125, 255) and not self.connected():
            raise HostUnreachable(self.host.name, "the connection to its Podman was lost")
        return done

    def _host_env(self) -> list[str]:
        # sshd without a login session sets no XDG_RUNTIME_DIR: the host's podman finds its
        # runtime directory where its API socket lives (/run/user/UID/podman/podman.sock).
        socket = PurePosixPath(self.host.target.socket)
        if socket.parent.name != "podman":
            return []
        return ["env", f"XDG_RUNTIME_DIR={socket.parent.parent}"]

    def facts(self) -> EngineFacts:
        """The host's own: its Podman (the server), its cgroups, whether it is rootless.
        Asked once per connection: each question is a round trip over SSH."""
        if self._facts is None:
            self._facts = self._ask_facts()
        return self._facts

    def _ask_facts(self) -> EngineFacts:
        # One round trip: `info` comes from the host's service, its Version the server's.
        template = "{{.Host.CgroupsVersion}} {{.Host.Security.Rootless}} {{.Version.Version}}"
        found = self.cli(["info", "--format", template], timeout=60)
        cgroups, rootless, version = [*found.out.strip().split(" "), "", "", ""][:3]
        if not VERSION_RE.fullmatch(version):  # it is recorded in every fingerprint
            raise WriterpoolError(
                "host_podman_unavailable", f"host {self.name}'s Podman reports no usable version"
            )
        return EngineFacts(self.name, version, cgroups == "v2", rootless == "true")

    def ensure_image(self, image_id: str) -> None:
        # Present by ID on the host itself; `writerpool image transfer` copies it there.
        # A positive answer holds for the connection: an image removed meanwhile makes
        # the next `podman run --pull=never` fail, and its caller reports that.
        if image_id in self._images:
            return
        if self.image_exists(image_id):
            self._images.add(image_id)
        else:
            raise WriterpoolError(
                "image_unavailable",
                f"the image {image_id[:12]} is not on host {self.name}; "
                f"run `writerpool image transfer --host {self.name}`",
            )

    # -- a writer's storage: the host's volumes ---------------------------
    def storage_mount(
        self, writer: Writer, part: str, target: str, *, sub_path: str = "",
        read_only: bool = False,
    ) -> Mount | VolumeMount:  # fmt: skip
        # The host's named volume: a path of the controller would resolve on the host.
        if not sub_path:
            return VolumeMount(volume=volumes.volume_name(writer.name, part), target=target,
                               read_only=read_only)  # fmt: skip
        # No volume sub-paths in Podman 4.3: the path inside the volume, on the host.
        source = self._root(writer, part).joinpath(*inside(sub_path))
        return Mount(source=Path(str(source)), target=target, read_only=read_only)

    def _root(self, writer: Writer, part: str) -> PurePosixPath:
        # Asked once per connection: a volume keeps its directory while it exists.
        name = volumes.volume_name(writer.name, part)
        if name not in self._roots:
            self._roots[name] = volumes.volume_root(self, writer.name, part)
        return self._roots[name]

    def storage_present(self, writer: Writer, part: str) -> bool:
        # A volume of that name another state made is not this writer's: writer_name_taken.
        return volumes.volume_name(writer.name, part) in volumes.writer_volumes(self, writer)

    def create_storage(self, writer: Writer, *, cache: bool, adopt: bool) -> None:
        # Named volumes of the host: nothing of the controller's file system stands in.
        volumes.create_volumes(self, writer, cache=cache, adopt=adopt)

    def remove_storage(self, writer: Writer) -> None:
        for part in (*volumes.STORAGE, "cache"):  # a new volume may get another directory
            self._roots.pop(volumes.volume_name(writer.name, part), None)
        volumes.remove_volumes(self, writer)

    @contextlib.contextmanager
    def agent_dir(self, writer: Writer) -> Iterator[Path]:
        """Rendered on the controller (`writer.record.rendered_agent`), then written into the
        agent volume by the host's account over the master: no container writes it, and
        the writer's containers mount that volume read-only. The writer's egress
        directory on the host is made too: with both, every mount a container of the
        writer has exists there (a warm writer's container starts before any forward)."""
        rendered = ensure_private_dir(writer.record.rendered_agent)
        yield rendered
        packed = volumes.packed_agent_dir(rendered)  # refused past its cap before asking
        volumes.unpack_agent_dir(self.host, self._root(writer, "agent"), writer.name, packed)
        self._own_directories(self._egress_there(writer))

    # -- what a writer's session reaches -----------------------------------
    def _sockets_dir(self) -> PurePosixPath:
        return PurePosixPath(self.host.target.socket).parent.parent / "writerpool"

    def _egress_there(self, writer: Writer) -> PurePosixPath:
        if not FORWARD_RE.fullmatch(writer.name):
            raise ValueError("a writer's name: lowercase letters, digits, _ and -")
        return self._sockets_dir() / "egress" / writer.name

    def egress_mount(self, writer: Writer) -> Mount:
        # The writer's own directory on the host, as EGRESS_DIR is on this machine: the
        # session's forward puts its socket in it at the session's start (a warm
        # writer's container is already running then). Read-only: the agent may connect
        # to the socket, never replace it.
        there = Path(str(self._egress_there(writer)))
        return Mount(source=there, target=EGRESS_DIR, read_only=True)

    @contextlib.contextmanager
    def egress_endpoint(self, writer: Writer) -> Iterator[Mount]:
        there = self._egress_there(writer)
        self._own_directories(there)
        with self._forward(writer.proxy_socket, there / EGRESS_SOCKET):
            yield self.egress_mount(writer)

    def _forwarded_path(self, name: str) -> PurePosixPath:
        if not FORWARD_RE.fullmatch(name):
            raise ValueError("a forwarded socket's name: lowercase letters, digits, _ and -")
        return self._sockets_dir() / f"{name}.sock"

    def _own_directories(self, path: PurePosixPath) -> None:
        """`path` and its parents up to the sockets directory, the SSH user's own."""
        chain = [path, *[p for p in path.parents if self._sockets_dir() in (p, *p.parents)]]
        made = self.host.exec(["sh", "-c", _OWN_DIRECTORIES, "sh",
                               *map(str, reversed(chain))], timeout=20)  # fmt: skip
        if made.returncode != 0:
            raise WriterpoolError(
                "host_config_invalid",
                f"host {self.host.name}: the directory for forwarded sockets beside its url's "
                "socket is not the SSH user's own (another account may replace a socket there)",
            )

    @contextlib.contextmanager
    def forwarded_socket(self, local: Path, name: str) -> Iterator[str]:
        """The controller's Unix socket `local`, made to answer on the host for the block:
        a socket path there that a container may mount. The forward and the host's socket
        end with the block (and with the process that opened it, killed too)."""
        remote = self._forwarded_path(name)
        self._own_directories(remote.parent)
        with self._forward(local, remote):
            yield str(remote)

    @contextlib.contextmanager
    def _forward(self, local: Path, remote: PurePosixPath) -> Iterator[None]:
        # ssh refuses a forward whose socket path is longer than a Unix socket's (108
        # bytes): it connects through a short link in a private directory of its own.
        short = Path(tempfile.mkdtemp(prefix="wp-", dir=tempfile.gettempdir()))  # 0700
        try:
            (short / "s").symlink_to(local)
            with self.host.forward(short / "s", str(remote), reverse=True):
                yield
        finally:
            shutil.rmtree(short, ignore_errors=True)
            with contextlib.suppress(WriterpoolError):  # an unreachable host keeps nothing
                self.host.exec(["rm", "-f", "--", str(remote)], timeout=20)

    def check_network(self, network: str, allow: tuple[str, ...] | None) -> None:
        check_remote_network(self.name, network, allow)

    # -- what the acceptance harness is checked against --------------------
    def planted_canary(self) -> AbstractContextManager[Canary]:
        return probes.planted_canary(self.host)

    def loopback_listener(self) -> AbstractContextManager[int]:
        return probes.loopback_port(self.host)

    def run_uncontained(self, program: Path, env: dict[str, str]) -> bytes:
        return probes.run_over(self.host, program, env)

    def _ensure_service(self) -> None:
        # The host's service is its own (a user unit or `podman system service`); the
        # controller cannot start it, only find it gone.
        if not self.connected():
            raise HostUnreachable(self.host.name, "the connection to its Podman was lost")

    def _api(self, call: Callable[[], _T], what: str) -> _T:
        try:
            return super()._api(call, what)
        except PodmanApiUnavailable as exc:
            self.raise_if_gone(exc)
            raise


@contextlib.contextmanager
def connect(name: str, host: HostConfig) -> Iterator[RemotePodman]:
    """Podman on the configured host `name` for the life of the block."""
    ssh = SshRoute.from_config(name, host)
    base = default_socket().parent.parent  # $XDG_RUNTIME_DIR
    base = base if base.is_dir() else Path(tempfile.gettempdir())
    private = Path(tempfile.mkdtemp(prefix="writerpool-host-", dir=base))  # 0700
    local, control = private / "podman.sock", private / "ssh.ctl"
    try:
        with ssh.forward(local, host.target.socket, master=control) as forward:
            remote = RemotePodman(ssh.multiplexed(control), local, forward)
            remote.require_api()
            yield remote
    finally:
        shutil.rmtree(private, ignore_errors=True)
