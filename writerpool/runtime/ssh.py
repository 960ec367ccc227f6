"""The SSH connection to a Podman host, with its key pinned.

Podman's own SSH transport reads only ~/.ssh/known_hosts; so writerpool runs `ssh`
itself, with the host's pinned known_hosts file, StrictHostKeyChecking=yes and nothing
from the user's ssh config.
A changed key is refused (`host_key_mismatch`), never accepted.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from writerpool.config.hosts import Host, SshTarget
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, Completed, Process, clean_env, run, spawn, stop
from writerpool.runtime.ssh_files import check_key_file

CONNECT_SECONDS = 5
TUNNEL_READY_SECONDS = 10.0
# A forward's command on the host: it returns when the forward's stdin ends.
HOLD = "cat >/dev/null"
_UNREACHABLE = (
    "Connection refused",
    "Connection timed out",
    "No route to host",
    "Network is unreachable",
    "Could not resolve hostname",
    "Connection closed",
    "Connection reset",
    "Broken pipe",
    "Timeout, server",
)
KEY_REMEDY = (
    "compare the host's key with its administrator (ssh-keyscan shows what it presents); "
    "write the right key into the host's known_hosts file only once you trust it"
)


class HostUnreachable(WriterpoolError):
    def __init__(self, name: str, detail: str) -> None:
        super().__init__(
            "writer_host_unreachable", f"host {name} does not answer over SSH: {detail}"
        )


def classify(name: str, stderr: bytes) -> WriterpoolError:
    """The error an ssh exit of 255 (a connection failure) stands for."""
    text = stderr.decode(errors="replace")
    changed = "REMOTE HOST IDENTIFICATION HAS CHANGED" in text
    if changed or ("key for" in text and "differs" in text):
        return WriterpoolError(
            "host_key_mismatch",
            f"host {name} presented another key than its pinned one; refused. {KEY_REMEDY}",
        )
    if "Host key verification failed" in text or ("No " in text and "host key is known" in text):
        return WriterpoolError(
            "host_key_unpinned", f"host {name}'s known_hosts file pins no key for it; refused"
        )
    # ssh's own words name the address and user: only the kind of failure is kept.
    for marker in _UNREACHABLE:
        if marker in text:
            return HostUnreachable(name, marker.lower())
    if "Permission denied" in text:
        return WriterpoolError(
            "host_config_invalid", f"host {name} refused the identity key (Permission denied)"
        )
    return HostUnreachable(name, "ssh could not connect")


@dataclass(frozen=True)
class Forward:
    """A running forward: alive while its ssh process is (a lost connection ends it)."""

    proc: Process

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass(frozen=True)
class SshHost:
    """One configured host: how to reach it, and the argv that does, checked keys only."""

    name: str
    target: SshTarget
    identity: Path
    known_hosts: Path
    binary: str = "ssh"

    @classmethod
    def from_config(cls, name: str, host: Host) -> SshHost:
        check_key_file(name, "identity", host.identity, private=True)
        check_key_file(name, "known_hosts", host.known_hosts, private=False)
        binary = os.environ.get("WRITERPOOL_SSH", "ssh")
        return cls(name, host.target, host.identity, host.known_hosts, binary)

    def argv(self, *options: str) -> list[str]:
        """ssh with the pinned key file only; `options` go before the destination."""
        return [
            self.binary,
            "-F", "/dev/null",
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "CheckHostIP=no",
            "-o", "UpdateHostKeys=no",
            "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none",
            "-o", f"ConnectTimeout={CONNECT_SECONDS}",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=2",
            "-i", str(self.identity),
            "-p", str(self.target.port),
            *options,
            "--",
            f"{self.target.user}@{self.target.address}",
        ]  # fmt: skip

    def exec(
        self, command: Sequence[str], *, timeout: float = 60.0, input: bytes | None = None
    ) -> Completed:
        """Run `command` on the host (each word quoted for its shell); a connection
        failure raises its own error, the command's own failure is returned."""
        remote = " ".join(shlex.quote(word) for word in command)
        try:
            done = run([*self.argv(), remote], env=clean_env(), timeout=timeout, input=input,
                       check=False)  # fmt: skip
        except CommandFailed as exc:
            if exc.timed_out:
                raise HostUnreachable(self.name, f"no answer within {timeout:g}s") from exc
            raise
        if done.returncode == 255:
            raise classify(self.name, done.stderr)
        return done

    @contextlib.contextmanager
    def forward(self, local: Path, remote: str, *, reverse: bool = False) -> Iterator[Forward]:
        """Forward a Unix socket for the life of the block: `local` answers for the
        host's `remote` socket (-L), or, reversed, `remote` on the host for `local` (-R)."""
        spec = f"{remote}:{local}" if reverse else f"{local}:{remote}"
        options = ["-T", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                   "-R" if reverse else "-L", spec]  # fmt: skip
        # Not -N: the host waits for the end of the forward's stdin, a pipe only this
        # process holds, so a forward ends with the process that opened it, even killed;
        # the host's socket of a reversed one goes then too (sshd leaves it behind).
        hold = f"{HOLD}; rm -f -- {shlex.quote(remote)}" if reverse else HOLD
        with tempfile.TemporaryFile() as errors:
            proc = spawn([*self.argv(*options), hold], env=clean_env(), stdin_pipe=True,
                         stderr_to=errors.fileno())  # fmt: skip
            try:
                self._await_forward(proc, errors, local, remote, reverse)
                yield Forward(proc)
            finally:
                stop(proc)
                if not reverse:
                    with contextlib.suppress(FileNotFoundError):
                        local.unlink()

    def _await_forward(
        self,
        proc: Process,
        errors: IO[bytes],
        local: Path,
        remote: str,
        reverse: bool,
    ) -> None:
        deadline = time.monotonic() + TUNNEL_READY_SECONDS
        while time.monotonic() < deadline:  # bounded by TUNNEL_READY_SECONDS
            if proc.poll() is not None:
                raise classify(self.name, _read_all(errors))
            if (not reverse and local.is_socket()) or (reverse and self._remote_socket(remote)):
                return
            time.sleep(0.05 if not reverse else 0.2)
        raise HostUnreachable(self.name, "the forwarded socket did not appear in time")

    def _remote_socket(self, remote: str) -> bool:
        return self.exec(["test", "-S", remote], timeout=10).returncode == 0


def _read_all(errors: IO[bytes]) -> bytes:
    errors.seek(0)
    return errors.read(64 * 1024)
