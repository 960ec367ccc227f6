"""The SSH connection to a Podman host, with its key pinned.

Podman's own SSH transport reads only ~/.ssh/known_hosts; so writerpool runs `ssh`
itself, with the host's pinned known_hosts file, StrictHostKeyChecking=yes and nothing
from the user's ssh config.
A changed key is refused (`host_key_mismatch`), never accepted.

A connection's first ssh process is its master (OpenSSH's ControlMaster, its control
socket in the connection's private 0700 directory): every later command and forward rides
it, so none pays a handshake of its own.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from writerpool.config.hosts import HostConfig, SshTarget
from writerpool.errors import WriterpoolError
from writerpool.proc import (
    CommandFailed,
    Completed,
    OutputTooLarge,
    Process,
    clean_env,
    run,
    run_capped,
    spawn,
    stop,
)
from writerpool.runtime.ssh_files import check_key_file

CONNECT_SECONDS = 5
# What a command on the host may print: its answers are a line or a harness report; a
# host that sends more is refused before the controller holds it.
EXEC_OUTPUT_MAX = 16 * 1024 * 1024
TUNNEL_READY_SECONDS = 10.0
# A forward's command on the host: it says so once the forward is up (sshd binds a
# forward before it runs the command of a session opened after it), then returns when
# the forward's stdin ends.
READY = b"writerpool-forward-ready"
HOLD = f"echo {READY.decode()} && cat >/dev/null"
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
class SshRoute:
    """One configured host: how to reach it, and the argv that does, checked keys only."""

    name: str
    target: SshTarget
    identity: Path
    known_hosts: Path
    binary: str = "ssh"
    # The master connection's control socket: set, every command rides that connection
    # (and fails as unreachable once the master is gone).
    control: Path | None = None

    @classmethod
    def from_config(cls, name: str, host: HostConfig) -> SshRoute:
        check_key_file(name, "identity", host.identity, private=True)
        check_key_file(name, "known_hosts", host.known_hosts, private=False)
        binary = os.environ.get("WRITERPOOL_SSH", "ssh")
        return cls(name, host.target, host.identity, host.known_hosts, binary)

    def multiplexed(self, control: Path) -> SshRoute:
        """This host, its commands riding the master whose control socket is `control`."""
        return replace(self, control=control)

    def argv(self, *options: str) -> list[str]:
        """ssh with the pinned key file only; `options` go before the destination."""
        # With a master, a command rides it or fails: `false` stands in for the network
        # when the master is gone, so a lost connection stays lost (never a quiet new one).
        mux = () if self.control is None else ("-o", f"ControlPath={self.control}",
                                               "-o", "ControlMaster=no",
                                               "-o", "ProxyCommand=false")  # fmt: skip
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
            "-o", "Compression=no",
            "-i", str(self.identity),
            "-p", str(self.target.port),
            *mux,
            *options,
            "--",
            f"{self.target.user}@{self.target.address}",
        ]  # fmt: skip

    def command_argv(self, command: Sequence[str]) -> list[str]:
        """ssh running `command` on the host, each word quoted for the host's shell."""
        return [*self.argv(), " ".join(shlex.quote(word) for word in command)]

    def exec(
        self, command: Sequence[str], *, timeout: float = 60.0, input: bytes | None = None
    ) -> Completed:
        """Run `command` on the host (each word quoted for its shell); a connection
        failure raises its own error, the command's own failure is returned."""
        try:
            done = run_capped(self.command_argv(command), env=clean_env(), timeout=timeout,
                              input=input, limit=EXEC_OUTPUT_MAX)  # fmt: skip
        except OutputTooLarge as exc:
            raise WriterpoolError(
                "command_failed", f"host {self.name} answered with over {EXEC_OUTPUT_MAX} bytes"
            ) from exc
        except CommandFailed as exc:
            if exc.timed_out:
                raise HostUnreachable(self.name, f"no answer within {timeout:g}s") from exc
            raise
        if done.returncode == 255:
            raise classify(self.name, done.stderr)
        return done

    @contextlib.contextmanager
    def forward(
        self, local: Path, remote: str, *, reverse: bool = False, master: Path | None = None
    ) -> Iterator[Forward]:
        """Forward a Unix socket for the life of the block: `local` answers for the
        host's `remote` socket (-L), or, reversed, `remote` on the host for `local` (-R).
        With `master`, this ssh process becomes the connection's master, its control
        socket there."""
        spec = f"{remote}:{local}" if reverse else f"{local}:{remote}"
        options = ["-T", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                   "-R" if reverse else "-L", spec]  # fmt: skip
        ssh = self
        if master is not None:
            ssh = replace(self, control=None)
            options = ["-o", "ControlMaster=yes", "-o", f"ControlPath={master}", *options]
        # Not -N: the host waits for the end of the forward's stdin, a pipe only this
        # process holds, so a forward ends with the process that opened it, even killed;
        # the host's socket of a reversed one goes then too (sshd leaves it behind).
        hold = f"{HOLD}; rm -f -- {shlex.quote(remote)}" if reverse else HOLD
        with tempfile.TemporaryFile() as errors:
            proc = spawn([*ssh.argv(*options), hold], env=clean_env(), stdin_pipe=True,
                         stderr_to=errors.fileno())  # fmt: skip
            try:
                self._await_forward(proc, errors)
                yield Forward(proc)
            finally:
                stop(proc)
                if reverse and self.control is not None:
                    self._cancel(spec)
                if not reverse:
                    with contextlib.suppress(FileNotFoundError):
                        local.unlink()

    def _await_forward(self, proc: Process, errors: IO[bytes]) -> None:
        """Until the host's command says the forward is up: no polling over SSH."""
        if proc.stdout is None:  # piped by spawn
            raise AssertionError("the forward's stdout is not piped")
        fd, seen = proc.stdout.fileno(), b""
        deadline = time.monotonic() + TUNNEL_READY_SECONDS
        while READY not in seen:  # bounded by TUNNEL_READY_SECONDS and the line's length
            left = deadline - time.monotonic()
            if left <= 0 or len(seen) > 4 * len(READY):
                raise HostUnreachable(self.name, "the forward did not come up in time")
            if select.select([fd], [], [], left)[0]:
                chunk = os.read(fd, 256)
                if not chunk:  # ssh ended: the forward or the connection failed
                    proc.wait()
                    raise classify(self.name, _read_all(errors))
                seen += chunk

    def _cancel(self, spec: str) -> None:
        # A forward asked for through the master stays with the master when its own ssh
        # process ends: the master is told to drop it.
        argv = self.argv("-O", "cancel", "-R", spec)
        with contextlib.suppress(CommandFailed):  # a master gone took its forwards along
            run(argv, env=clean_env(), timeout=CONNECT_SECONDS * 2, check=False)


def _read_all(errors: IO[bytes]) -> bytes:
    errors.seek(0)
    return errors.read(64 * 1024)
