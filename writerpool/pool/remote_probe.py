"""What the harness is checked against on a host over SSH, as on this machine: a canary
file in the SSH user's home there, and a port listening on that host's loopback (which a
writer's container must not reach). Both last for one block and are gone after it."""

from __future__ import annotations

import contextlib
import secrets
import select
import shlex
from collections.abc import Iterator
from typing import NamedTuple

from writerpool.errors import WriterpoolError
from writerpool.proc import clean_env, spawn, stop
from writerpool.runtime.ssh import SshHost, classify

LISTENER_READY_SECONDS = 15.0
# Runs on the host: a loopback listener held until its stdin ends, which happens when
# the ssh process that started it ends (killed too).
_LISTEN = (
    "import socket, sys\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(8)\n"
    "print(s.getsockname()[1], flush=True); sys.stdin.read()\n"
)


class Canary(NamedTuple):
    home: str
    file: str
    directory: str


@contextlib.contextmanager
def planted_canary(ssh: SshHost) -> Iterator[Canary]:
    """A private canary file in the SSH user's home on the host, removed after the block."""
    home = ssh.exec(["sh", "-c", 'printf %s "$HOME"'], timeout=20).out.strip()
    if not home.startswith("/"):
        raise WriterpoolError("command_failed", f"host {ssh.name} reports no home directory")
    directory = f"{home}/.writerpool-canary-{secrets.token_hex(6)}"
    made = ssh.exec(["sh", "-c", 'mkdir -m 0700 -- "$1" && printf "writerpool canary\\n" '
                     '> "$1/secret"', "sh", directory], timeout=20)  # fmt: skip
    if made.returncode != 0:
        raise WriterpoolError("command_failed", f"host {ssh.name}: the canary cannot be planted")
    try:
        yield Canary(home, f"{directory}/secret", directory)
    finally:
        with contextlib.suppress(WriterpoolError):  # an unreachable host keeps its canary
            ssh.exec(["rm", "-rf", "--", directory], timeout=30)


@contextlib.contextmanager
def loopback_port(ssh: SshHost) -> Iterator[int]:
    """A port listening on the host's own loopback for the life of the block."""
    proc = spawn([*ssh.argv("-T"), "python3 -c " + shlex.quote(_LISTEN)], env=clean_env())
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], LISTENER_READY_SECONDS)
        line = proc.stdout.readline(16) if ready else b""
        if not line.strip().isdigit():
            if proc.poll() == 255:  # ssh's own failure: the connection's code
                raise classify(ssh.name, proc.stderr.read(64 * 1024))
            raise WriterpoolError("command_failed", f"host {ssh.name}: no loopback listener "
                                  "could be opened there (is python3 installed?)")  # fmt: skip
        yield int(line)
    finally:
        stop(proc)
