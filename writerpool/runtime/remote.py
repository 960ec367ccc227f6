"""A Podman host over SSH: the same Podman class, pointed at a forwarded API socket.

The host's API socket is forwarded to a private socket of the controller for as long
as the connection is open; podman-py and the podman CLI (`--url unix://…`) both use it,
so every operation of `Podman` works unchanged on the host.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from writerpool.config.hosts import Host
from writerpool.proc import CommandFailed, Completed
from writerpool.runtime.podman import Podman, default_socket, socket_answers
from writerpool.runtime.spec import ContainerSpec
from writerpool.runtime.ssh import HostUnreachable, SshHost


class RemotePodman(Podman):
    """Podman on `host`, through the forwarded socket `socket_path`."""

    def __init__(self, host: SshHost, socket_path: Path) -> None:
        super().__init__(socket_path=socket_path)
        self.host = host

    def url_args(self) -> list[str]:
        return ["--url", f"unix://{self.socket_path}"]

    def cli(
        self,
        args: Sequence[str],
        *,
        timeout: float = 120.0,
        input: bytes | None = None,
        check: bool = True,
    ) -> Completed:
        try:
            done = super().cli([*self.url_args(), *args], timeout=timeout, input=input, check=check)
        except CommandFailed as exc:
            self.raise_if_gone(exc)
            raise
        if done.returncode == 125 and not socket_answers(self.socket_path):
            raise HostUnreachable(self.host.name, "the connection to its Podman was lost")
        return done

    def raise_if_gone(self, cause: BaseException) -> None:
        if not socket_answers(self.socket_path):
            raise HostUnreachable(
                self.host.name, "the connection to its Podman was lost"
            ) from cause

    def version(self) -> str:
        """The host's Podman (the server), not this machine's client."""
        found = self.cli(["version", "--format", "{{.Server.Version}}"], timeout=30)
        return found.out.strip()

    def run_argv(self, spec: ContainerSpec, command: list[str], *, interactive: bool) -> list[str]:
        return [self.binary, *self.url_args(), *spec.run_argv(command, interactive=interactive)]

    def _ensure_service(self) -> None:
        # The host's service is its own (a user unit or `podman system service`); the
        # controller cannot start it, only find it gone.
        if not socket_answers(self.socket_path):
            raise HostUnreachable(self.host.name, "its Podman API socket does not answer")


@contextlib.contextmanager
def connect(name: str, host: Host) -> Iterator[RemotePodman]:
    """Podman on the configured host `name` for the life of the block."""
    ssh = SshHost.from_config(name, host)
    base = default_socket().parent.parent  # $XDG_RUNTIME_DIR
    base = base if base.is_dir() else Path(tempfile.gettempdir())
    private = Path(tempfile.mkdtemp(prefix="writerpool-host-", dir=base))  # 0700
    local = private / "podman.sock"
    try:
        with ssh.forward(local, host.target.socket):
            yield RemotePodman(ssh, local)
    finally:
        shutil.rmtree(private, ignore_errors=True)
