"""What the acceptance harness is checked against, and how it runs uncontained, on this
machine or on a host over SSH (each host's `planted_canary`, `loopback_listener` and
`run_uncontained` are these): a canary file in the account's home, a port listening on
the host's loopback (which a writer's container must not reach), and a private work
directory for the isolation control's uncontained run. Each lasts for one block and is
made and removed by one child process (a shell, or ssh running one), so a controller
killed inside the block leaves nothing behind: the child sees its stdin end and cleans
up. The listener on this machine is a socket of this process: it ends with it."""

from __future__ import annotations

import contextlib
import re
import secrets
import select
import shlex
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, Process, clean_env, run, spawn, stop, wait_or_stop
from writerpool.runtime.host import Canary
from writerpool.runtime.ssh import SshRoute, classify

LISTENER_READY_SECONDS = 15.0
REMOVE_SECONDS = 30.0
# The harness's uncontained run (the isolation control): on this machine, over SSH.
HERE_SECONDS = 60.0
OVER_SSH_SECONDS = 90.0
PATH_MAX = 4096
_PATH = re.compile(r"^/[A-Za-z0-9_./-]{1,4000}$")
# Runs on the host: makes the directory ($1 "home" is $HOME), prints its path, waits for
# the end of stdin (this ssh process ending, killed too) and removes it.
_HOLD_DIRECTORY = (
    'case "$1" in home) b="$HOME" ;; *) b="$1" ;; esac; d="$b/$2"\n'
    'mkdir -m 0700 -- "$d" || exit 3\n'
    'if [ "$3" = 1 ] && ! printf "writerpool canary\\n" > "$d/secret"; then\n'
    '  rm -rf -- "$d"; exit 3\nfi\n'
    'printf "%s\\n" "$d"; cat >/dev/null; rm -rf -- "$d"\n'
)
# Runs on the host: a loopback listener held until its stdin ends, which happens when
# the ssh process that started it ends (killed too).
_LISTEN = (
    "import socket, sys\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(8)\n"
    "print(s.getsockname()[1], flush=True); sys.stdin.read()\n"
)


def _reject_home(ssh: SshRoute) -> WriterpoolError:
    return WriterpoolError("command_failed", f"host {ssh.name} reports no usable home directory "
                           "(an absolute path of letters, digits and ._-/ only)")  # fmt: skip


@contextlib.contextmanager
def _held(
    argv: list[str], usable: Callable[[str], bool], failed: Callable[[Process], WriterpoolError]
) -> Iterator[str]:
    """Run `argv` (a shell running _HOLD_DIRECTORY) for the life of the block; the path
    it printed, when `usable`."""
    proc = spawn(argv, env=clean_env())
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], LISTENER_READY_SECONDS)
        line = proc.stdout.readline(PATH_MAX + 1).decode(errors="replace") if ready else ""
        directory = line.removesuffix("\n")
        if not usable(directory):
            raise failed(proc)
        yield directory
    finally:
        # The end of stdin removes the directory; waiting says it is gone.
        _close(proc)
        wait_or_stop(proc, REMOVE_SECONDS)


def held_directory(
    ssh: SshRoute, base: str, name: str, *, canary: bool
) -> contextlib.AbstractContextManager[str]:
    """A private directory `name` under `base` on the host ("home": the SSH user's home),
    with a canary file in it when asked, for the life of the block: made and removed by
    one ssh process, so a controller killed inside the block leaves nothing there."""
    remote = ["sh", "-c", _HOLD_DIRECTORY, "sh", base, name, "1" if canary else "0"]

    def failed(proc: Process) -> WriterpoolError:
        if proc.poll() == 255 and proc.stderr is not None:  # ssh's own failure
            return classify(ssh.name, proc.stderr.read(64 * 1024))
        return _reject_home(ssh)

    argv = [*ssh.argv("-T"), " ".join(shlex.quote(w) for w in remote)]
    return _held(argv, lambda directory: _usable(directory, name), failed)


def _close(proc: Process) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()


def _usable(directory: str, name: str) -> bool:
    # A home with `:` would split the harness's canary list, a newline its line: refused.
    path = PurePosixPath(directory)
    return (_PATH.fullmatch(directory) is not None and ".." not in path.parts
            and path.name == name)  # fmt: skip


@contextlib.contextmanager
def planted_canary(ssh: SshRoute) -> Iterator[Canary]:
    """A private canary file in the SSH user's home on the host, removed after the block
    (or when the process that planted it ends, killed too)."""
    name = f".writerpool-canary-{secrets.token_hex(6)}"
    with held_directory(ssh, "home", name, canary=True) as directory:
        home = str(PurePosixPath(directory).parent)
        yield Canary(home, f"{directory}/secret", directory)


@contextlib.contextmanager
def canary_here() -> Iterator[Canary]:
    """A private canary file in this account's home, removed after the block (or when
    the process that planted it ends, killed too)."""
    home = Path.home()
    name = f".writerpool-canary-{secrets.token_hex(6)}"
    argv = ["sh", "-c", _HOLD_DIRECTORY, "sh", str(home), name, "1"]

    def failed(proc: Process) -> WriterpoolError:
        return WriterpoolError("command_failed", "the canary cannot be planted in this "
                               "account's home directory")  # fmt: skip

    with _held(argv, lambda directory: directory == str(home / name), failed) as directory:
        yield Canary(str(home), f"{directory}/secret", directory)


@contextlib.contextmanager
def loopback_port(ssh: SshRoute) -> Iterator[int]:
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


@contextlib.contextmanager
def loopback_here() -> Iterator[int]:
    """A port listening on this machine's loopback for the life of the block."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def run_here(program: Path, env: dict[str, str]) -> bytes:
    """Run the harness `program` as this account, with no containment, in a fresh private
    work directory (WRITERPOOL_HARNESS_WORK names it, removed afterwards); its stdout."""
    work = Path(tempfile.mkdtemp(prefix="writerpool-control-"))
    try:
        done = run([sys.executable, str(program)], cwd=work, timeout=HERE_SECONDS,
                   env=clean_env({**env, "WRITERPOOL_HARNESS_WORK": str(work)}),
                   check=False)  # fmt: skip
    except CommandFailed:
        return b""
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return done.stdout


# Runs on the host, in the private work directory: the harness read from stdin (a zip
# archive, or a script), written there and run as `python3 FILE` would run it.
_RUN_STDIN = (
    "import os, runpy, sys\n"
    "path = os.path.abspath('.writerpool-harness')\n"
    "with open(path, 'xb') as f: f.write(sys.stdin.buffer.read())\n"
    "sys.argv = [path]\n"
    "runpy.run_path(path, run_name='__main__')\n"
)


def run_over(ssh: SshRoute, program: Path, env: dict[str, str]) -> bytes:
    """The same on the host, as its SSH user: the program streamed over the connection
    and run by the host's python3 in a private work directory that one ssh process
    makes and removes (a controller killed meanwhile leaves none there)."""
    name = f"writerpool-control-{secrets.token_hex(6)}"
    with held_directory(ssh, "/tmp", name, canary=False) as work:
        given = {**env, "WRITERPOOL_HARNESS_WORK": work}
        words = ["env", *(f"{k}={v}" for k, v in sorted(given.items())), "python3", "-c",
                 _RUN_STDIN]  # fmt: skip
        done = ssh.exec(["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", work, *words],
                        timeout=OVER_SSH_SECONDS, input=program.read_bytes())  # fmt: skip
    return done.stdout
