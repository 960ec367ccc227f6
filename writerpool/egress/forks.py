"""Sessions' egress processes forked from one process that has already imported them.

A session's egress process used to be an interpreter of its own, which spent 0.4-0.5 s
of CPU on its start and imports (aiohttp, pydantic, asyncio) before it listened, and a
server kept one started ahead for its next session. Now an egress host (the supervisor)
starts `python -m writerpool.egress.worker --fork-server FD` once, and each session's
process is a fork of it. The fork server never holds anything of a session: no spec, no
credential, no socket. Those reach only the child, through the child's own stdin, as
before; the child confines itself as before (egress.worker.confine) and shares with the
fork server only the pages of the imports, copied on write.

A request is one datagram on a socket pair the host made (no path another process could
open) carrying the child's stdin and stdout; the answer is the child's pid and a pidfd
the fork server opened before it could reap the child, so that the host names that
process for good although it is not the host's child. The fork server ends at the end
of its socket (the host closed it, or died); its children go on until their own stdin
ends, as they did when they were the host's.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO

from writerpool import proc
from writerpool.errors import WriterpoolError

FLAG = "--fork-server"
REQUEST = b"fork"
PID = struct.Struct("=i")
ANSWER_TIMEOUT = 30.0  # the fork server's first answer waits for its start and imports
STOP_TIMEOUT = 10.0


class Forked:
    """A session's egress process as its host sees it: the fork server's child, not the
    host's, so it is watched and signalled through its pidfd (its exit status is the
    fork server's to reap and nobody's to read)."""

    def __init__(self, pid: int, pidfd: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self._pidfd: int | None = pidfd
        self._lock = threading.Lock()

    def ended(self) -> bool:
        return self.wait(0)

    def wait(self, timeout: float) -> bool:
        """Whether the process has ended, waiting up to `timeout` seconds for it."""
        with self._lock:
            if self._pidfd is None:
                return True
            pidfd = os.dup(self._pidfd)  # its own: a release() meanwhile closes the other
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            return bool(poller.poll(max(0, int(timeout * 1000))))
        finally:
            os.close(pidfd)

    def kill(self) -> None:
        with self._lock, contextlib.suppress(ProcessLookupError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def release(self) -> None:
        """Give up the pidfd (idempotent); `ended` says True from then on."""
        with self._lock:
            pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            os.close(pidfd)


class ForkServer:
    """The host's side of one fork server, started with `env` (its children's too)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.broken = False  # its socket failed: it forks no more
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [sys.executable, "-m", "writerpool.egress.worker", FLAG, str(theirs.fileno())]
            # Its children's working directory is their spec's (egress.worker.confine).
            self._process = proc.spawn(argv, env=env, cwd=Path("/"), stdin_pipe=False,
                                       stdout_pipe=False, stderr_to=2,
                                       pass_fds=(theirs.fileno(),))  # fmt: skip
        except OSError as exc:
            ours.close()
            raise WriterpoolError("egress_failed", "the egress fork server did not start") from exc
        finally:
            theirs.close()
        ours.settimeout(ANSWER_TIMEOUT)
        self._socket = ours
        self._lock = threading.Lock()

    @property
    def pid(self) -> int:
        return self._process.pid

    def running(self) -> bool:
        return self._process.poll() is None

    def fork(self) -> Forked:
        """A new egress process, waiting on its stdin for a session's spec."""
        child_in, stdin = os.pipe()
        stdout, child_out = os.pipe()
        try:
            with self._lock:
                if self.broken:
                    raise OSError("the fork server's socket failed before")
                socket.send_fds(self._socket, [REQUEST], [child_in, child_out])
                answer, fds, _, _ = socket.recv_fds(self._socket, 64, 1)
                if not answer:
                    raise OSError("the fork server ended")
        except OSError as exc:  # a timeout too: a late answer must never be the next one's
            self._break()
            os.close(stdin)
            os.close(stdout)
            raise WriterpoolError("egress_failed", "the egress fork server did not answer") from exc
        finally:
            os.close(child_in)
            os.close(child_out)
        if len(answer) != PID.size or len(fds) != 1:
            for fd in (*fds, stdin, stdout):
                os.close(fd)
            raise WriterpoolError("egress_failed", "the egress fork server could not fork")
        (pid,) = PID.unpack(answer)
        return Forked(pid, fds[0], os.fdopen(stdin, "wb"), os.fdopen(stdout, "rb"))

    def _break(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """End the fork server (at the end of its socket); its children go on."""
        self._break()
        self._socket.close()
        if proc.wait(self._process, STOP_TIMEOUT) is None:
            self._process.kill()
            self._process.wait()


# -- inside the fork server -----------------------------------------------------------


def serve_forks(fd: int, child: Callable[[], int]) -> int:
    """Fork a child running `child()` for each request on socket `fd`, until it ends."""
    control = socket.socket(fileno=fd)
    signal.signal(signal.SIGCHLD, _reap)
    while True:  # bounded by the host's requests
        try:
            request, fds, _, _ = socket.recv_fds(control, len(REQUEST), 2)
        except OSError:
            return 0
        if not request:
            return 0  # the host closed its end, or died
        if request != REQUEST or len(fds) != 2:
            for extra in fds:
                os.close(extra)
            continue
        try:
            _answer(control, _fork(control, fds, child))
        except OSError:
            return 0  # the host gave up on the answer (or died): nothing to say to it


def _fork(
    control: socket.socket, fds: list[int], child: Callable[[], int]
) -> tuple[int, int] | None:
    """(pid, pidfd) of the new child, or None when none could be made. SIGCHLD waits
    until the pidfd is open: the child cannot be reaped, and its pid reused, before."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        pid = os.fork()
        if pid == 0:
            _become(control, fds, child)
        return pid, os.pidfd_open(pid)
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})


def _answer(control: socket.socket, made: tuple[int, int] | None) -> None:
    if made is None:
        control.send(PID.pack(0))  # no pidfd: the host says it could not fork
        return
    pid, pidfd = made
    try:
        socket.send_fds(control, [PID.pack(pid)], [pidfd])
    finally:
        os.close(pidfd)


def _become(control: socket.socket, fds: list[int], child: Callable[[], int]) -> None:
    """The child's whole life: its stdio made the two descriptors it was sent."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        control.close()
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        for fd in fds:
            os.close(fd)
        code = child()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def _reap(signum: int, frame: object) -> None:
    del signum, frame
    while True:  # bounded by the children that have ended
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
