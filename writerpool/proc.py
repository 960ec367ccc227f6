"""The single subprocess wrapper: argv lists, explicit env and cwd, always a timeout."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from writerpool.errors import WriterpoolError
from writerpool.report import sanitize

# Trust anchors of hosts behind an intercepting proxy (not secrets): the variables pi,
# Node and Python read, and git's own. The one list; every environment builder uses it.
CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")
GIT_CA_VARIABLE = "GIT_SSL_CAINFO"

DEFAULT_TIMEOUT = 120.0
_WORD = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class CommandFailed(WriterpoolError):
    """A command exited non-zero, timed out or was missing: an expected failure with a
    code (`command_failed`, `command_timeout`), so it never ends as an internal error.
    Its message names the program and the last line of its stderr, path- and secret-free;
    str() keeps more of stderr for logs."""

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int,
        stdout: bytes,
        stderr: bytes,
        *,
        timed_out: bool = False,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        super().__init__("command_timeout" if timed_out else "command_failed", self._summary())

    def _summary(self) -> str:
        program = os.path.basename(self.argv[0]) if self.argv else "?"
        sub = self.argv[1] if len(self.argv) > 1 and _WORD.fullmatch(self.argv[1]) else ""
        what = f"{program} {sub}".strip()
        lines = self.stderr.decode(errors="replace").strip().splitlines()
        last = sanitize(lines[-1].strip())[:300] if lines else ""
        if self.timed_out:
            return f"{what} {last}"
        return f"{what} exited {self.returncode}" + (f": {last}" if last else "")

    def __str__(self) -> str:
        err = self.stderr.decode(errors="replace").strip()[-2000:]
        return f"{self.argv[0]} exited {self.returncode}: {err}"


@dataclass(frozen=True)
class Completed:
    argv: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode(errors="replace")


def run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    input: bytes | None = None,
    check: bool = True,
) -> Completed:
    """Run argv; raise CommandFailed on a non-zero exit when check is set."""
    try:
        proc = subprocess.run(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandFailed(
            argv, -1, b"", f"timed out after {timeout:g}s".encode(), timed_out=True
        ) from exc
    except FileNotFoundError as exc:
        raise CommandFailed(argv, 127, b"", f"{argv[0]}: not found".encode()) from exc
    done = Completed(list(argv), proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, proc.stdout, proc.stderr)
    return done


# How much of a streamed command's stderr is kept (its last bytes) for the error.
STDERR_TAIL = 64 * 1024


def run_streamed(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    timeout: float,
    input: bytes | IO[bytes],
    consume: Callable[[IO[bytes]], None],
) -> Completed:
    """Run argv with `input` on its stdin while `consume` reads its stdout as it comes
    (a stream too large to hold in memory). The command is killed when `consume` raises
    or the timeout passes; the Completed carries the exit code and stderr's tail."""
    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise CommandFailed(argv, 127, b"", f"{argv[0]}: not found".encode()) from exc
    tail = bytearray()
    expired = threading.Event()
    helpers = [
        threading.Thread(target=_drain_tail, args=(proc, tail), daemon=True),
        threading.Thread(target=_feed, args=(proc, input), daemon=True),
    ]
    timer = threading.Timer(timeout, _expire, args=(proc, expired))
    for thread in (*helpers, timer):
        thread.start()
    try:
        if proc.stdout is None:  # piped above
            raise AssertionError("stdout is not piped")
        consume(proc.stdout)
        proc.wait()
    except BaseException as exc:
        proc.kill()
        proc.wait()
        if expired.is_set():
            raise _timed_out(argv, timeout) from exc
        raise
    finally:
        timer.cancel()
        for thread in helpers:
            thread.join(timeout=10)
        _close_pipes(proc)
    if expired.is_set():
        raise _timed_out(argv, timeout)
    return Completed(list(argv), proc.returncode, b"", bytes(tail))


class OutputTooLarge(CommandFailed):
    """A command's stdout passed the bound its caller set (the command was killed)."""


def run_capped(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    timeout: float,
    input: bytes | None,
    limit: int,
) -> Completed:
    """run() for a command whose output another machine decides: stdout is held up to
    `limit` bytes (OutputTooLarge past it, the command killed), stderr's tail only."""
    out = bytearray()

    def consume(stream: IO[bytes]) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):  # bounded by limit
            out.extend(chunk)
            if len(out) > limit:
                raise OutputTooLarge(argv, -1, b"", f"over {limit} bytes of output".encode())

    done = run_streamed(argv, env=env, timeout=timeout, input=input or b"", consume=consume)
    return Completed(done.argv, done.returncode, bytes(out), done.stderr)


def _expire(proc: Process, expired: threading.Event) -> None:
    expired.set()
    proc.kill()


def _timed_out(argv: Sequence[str], timeout: float) -> CommandFailed:
    return CommandFailed(argv, -1, b"", f"timed out after {timeout:g}s".encode(), timed_out=True)


def _drain_tail(proc: Process, tail: bytearray) -> None:
    stream = proc.stderr
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):  # closed under us when killed
        for chunk in iter(lambda: stream.read(65536), b""):
            tail.extend(chunk)
            del tail[:-STDERR_TAIL]


def _feed(proc: Process, data: bytes | IO[bytes]) -> None:
    stream = proc.stdin
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):  # the command may exit without reading
        if isinstance(data, bytes):
            stream.write(data)
        else:
            shutil.copyfileobj(data, stream)  # a file: in chunks, never whole in memory
        stream.close()


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin_pipe: bool = True,
    stdout_pipe: bool = True,
    stderr_to: int | None = None,
    detach: bool = False,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start a long-lived process with piped stdio (agents), or detached from it (services).
    `pass_fds`: descriptors it inherits beside its stdio (a socket pair's end)."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin_pipe and not detach else subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdout_pipe and not detach else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL
        if detach
        else (stderr_to if stderr_to is not None else subprocess.PIPE),
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )


Process = subprocess.Popen[bytes]


def _close_pipes(proc: Process) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            with contextlib.suppress(OSError):  # a broken stdin pipe on close
                stream.close()


def stop(proc: Process, grace: float = 5.0) -> int:
    """End a spawned process: SIGTERM, then SIGKILL after `grace` seconds; its exit code.
    Its pipes are closed."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _close_pipes(proc)
    return proc.returncode


def wait_or_stop(proc: Process, timeout: float) -> int:
    """Wait up to `timeout` seconds for a process to end by itself, then stop it."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return stop(proc, grace=1.0)
    _close_pipes(proc)
    return proc.returncode


def wait(process: Process, timeout: float) -> int | None:
    """The process's exit status, or None when it is still running after `timeout`."""
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def started(pid: int) -> int | None:
    """When the process with this pid started (clock ticks after boot, /proc/PID/stat), or
    None when there is none. With its pid it names one process for good: a pid alone
    names another process once the first has ended and the number came round again."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        return int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def is_recorded_process(record: Mapping[str, object]) -> bool:
    """Whether the process a record names by "pid" (and "started", the `started` it
    recorded) still runs as this account's. A record without "started" (an older
    writerpool's) is taken by its pid alone."""
    pid, when = record.get("pid"), record.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the number is another's
        return False
    return not isinstance(when, int) or started(pid) == when


def exited(process: Process) -> bool:
    """Whether a spawned process has exited, leaving it unreaped: until it is reaped its
    pid (and so its process group's id) cannot be given to another process."""
    return process.returncode is not None or _peek(process) != "running"


def signal_group(process: Process, sig: int) -> None:
    """Signal the process group a process leads (spawned in a session of its own), only
    while the leader is unreaped: once reaped, its number may lead another's group."""
    # A leader that exited but is unreaped still holds its number; one reaped by another
    # hand (its Popen never knew) does not.
    if process.returncode is not None or _peek(process) == "reaped":
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _peek(process: Process) -> str:
    """ "running", "exited" (unreaped) or "reaped" (elsewhere), reaping nothing."""
    try:
        found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return "reaped"
    return "running" if found is None else "exited"


def start_daemon(argv: Sequence[str], *, env: Mapping[str, str]) -> None:
    """Start a long-lived service detached from this process: `setsid -f` hands it to
    init at once, so it may outlive us and is never left here as a zombie."""
    launcher = spawn(["setsid", "-f", *argv], env=env, detach=True)
    try:
        launcher.wait(timeout=10)
    except subprocess.TimeoutExpired as exc:
        launcher.kill()
        launcher.wait()
        raise CommandFailed(argv, -1, b"", b"could not be started in time", timed_out=True) from exc


def last_line(output: bytes, default: str = "") -> str:
    """The last non-blank line a command printed (its error, as a rule), or `default`."""
    lines = output.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else default


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: no inherited git or credential variables."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "XDG_RUNTIME_DIR",
        "TMPDIR",
        "USER",
        "LOGNAME",
        *CA_VARIABLES,
        GIT_CA_VARIABLE,
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(extra or {})
    return env
