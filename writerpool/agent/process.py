"""One long-lived agent process speaking JSON lines on stdin and stdout (pi's RPC mode,
Claude Code's stream-json): what every such adapter shares.

It starts the process the caller describes (on the host, or `podman run -i …` for a
container), writes command lines, and folds what the agent prints into turns
(events.py) through the subclass's `_take`. Two threads drain stdout and stderr for the
whole life of the process, because an agent dies of EPIPE when nobody reads. Stdin
stays open until close(). Prompt text is written to the agent and nowhere else.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Self

from writerpool.agent.events import TurnLog, TurnSnapshot
from writerpool.errors import WriterpoolError
from writerpool.proc import Process, exited, signal_group, spawn
from writerpool.report import sanitize

MAX_LINE = 64 * 1024 * 1024  # one event; pi repeats the whole partial message in each
STDERR_KEEP = 64 * 1024
ABORT_WAIT = 10.0
STDERR_LOG_LINES = 8
PIPE_SIZE = 1024 * 1024  # a larger pipe lets the agent finish its writes sooner
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)

log = logging.getLogger(__name__)


class LineAgent:
    """One running agent process and the turns it ran. Thread-safe. Subclasses say how
    a prompt and an abort are written, how the agent shows it is ready, and how a line
    of its output folds into the turns (`_take`, under no lock)."""

    name = "agent"  # in the operator's log

    def __init__(self, proc: Process) -> None:
        self._proc = proc
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._log = TurnLog()
        self._eof = False
        self._closing = False
        self._closed = False
        self._started = time.monotonic()
        self._stderr = bytearray()
        # Callers waiting for a turn to end without a thread of their own: key -> (turn, wake).
        self._watchers: dict[object, tuple[str, Callable[[], None]]] = {}
        self.startup_seconds: float | None = None  # start to the agent's first answer
        _widen_pipe(proc.stdout)
        self._threads = [
            threading.Thread(target=self._read_stdout, name=f"{self.name}-stdout", daemon=True),
            threading.Thread(target=self._read_stderr, name=f"{self.name}-stderr", daemon=True),
        ]
        # stderr's reader first: stdout's joins it when the agent's output ends.
        for thread in reversed(self._threads):
            thread.start()

    # -- to be given by each agent --------------------------------------------------

    def _handshake(self, timeout: float) -> None:
        """Return once the agent is ready for a prompt (raise session_start_failed)."""

    def _prompt_command(self, message: str, prompt_id: str) -> Mapping[str, object]:
        raise NotImplementedError

    def _abort(self, timeout: float) -> None:
        """Stop the running turn; return once the agent acknowledged it (bounded)."""
        raise NotImplementedError

    def _take(self, line: bytes) -> None:
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    def start(
        cls, argv: list[str], env: dict[str, str], cwd: Path | None, ready_timeout: float = 60.0
    ) -> Self:
        """Spawn the agent and return once it is ready for a prompt."""
        try:
            proc = spawn(argv, cwd=cwd, env=env)
        except OSError as exc:
            raise WriterpoolError(
                "session_start_failed", "the agent could not be launched"
            ) from exc
        agent = cls(proc)
        try:
            agent._handshake(ready_timeout)
        except BaseException:
            agent.close(timeout=5.0)
            raise
        return agent

    def _start_failed(self, why: str) -> WriterpoolError:
        lines = stderr_lines(self.stderr_tail())
        log.warning("%s did not start; its stderr ended with:\n%s", self.name,
                    "\n".join(lines) or "(nothing)")  # fmt: skip
        return WriterpoolError(
            "session_start_failed",
            f"the agent {why} while starting; the server log has its last stderr lines",
        )

    @property
    def alive(self) -> bool:
        return not self._eof and not exited(self._proc)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def stderr_tail(self) -> str:
        """The end of the agent's stderr, for diagnosis by an operator; never for clients."""
        with self._cond:
            return self._stderr.decode(errors="replace")

    def close(self, timeout: float = 10.0) -> None:
        """Abort a running turn, then end the process (stdin, SIGTERM, SIGKILL) in time."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            running = self._log.running
        deadline = time.monotonic() + timeout
        stage = timeout * 0.3
        if running is not None and self.alive:
            self._abort(stage)
        with self._cond:
            self._closing = True
        self._close_stdin()  # the agents exit as soon as their stdin ends
        if not self._exited(min(stage, deadline - time.monotonic())):
            self._signal(signal.SIGTERM)
            if not self._exited(min(stage, deadline - time.monotonic())):
                self._signal(signal.SIGKILL)
                self._exited(max(1.0, deadline - time.monotonic()))
        self._signal(signal.SIGKILL)  # whatever else is left in its process group
        self._proc.poll()  # reaped only now: its number led the group signalled above
        streams = (self._proc.stdout, self._proc.stderr)
        for thread, stream in zip(self._threads, streams, strict=True):
            thread.join(timeout=max(0.5, deadline - time.monotonic()))
            # A reader still blocked (a child kept the pipe open) keeps its stream.
            if stream is not None and not thread.is_alive():
                stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- turns -----------------------------------------------------------------

    def prompt(self, message: str) -> str:
        """Start a turn with this message; return its id."""
        turn_id = "t-" + secrets.token_hex(6)
        prompt_id = "prompt-" + turn_id
        with self._cond:
            if self._closed or not self.alive:
                raise WriterpoolError("session_closed", "the agent process has ended")
            self._log.begin(turn_id, prompt_id, time.time())
        if not self._send(self._prompt_command(message, prompt_id)):
            with self._cond:
                self._log.process_ended(time.time(), closing=False)
                self._cond.notify_all()
            self._wake_ended()
        return turn_id

    def abort(self) -> None:
        """Abort the running turn, if any; returns once the agent acknowledged (bounded)."""
        with self._cond:
            running = self._log.running
        if running is not None and self.alive:
            self._abort(ABORT_WAIT)

    def wait_quiet(self, timeout: float) -> None:
        """Return once no turn runs (or the process ended), at most timeout seconds on."""
        with self._cond:
            self._cond.wait_for(lambda: self._log.running is None or self._eof, timeout)

    def turn(self, turn_id: str) -> TurnSnapshot:
        with self._cond:
            return self._log.get(turn_id)

    def wait(self, turn_id: str, timeout: float) -> TurnSnapshot:
        """The turn once it ended, or as it is after timeout seconds."""
        with self._cond:
            self._log.get(turn_id)
            self._cond.wait_for(lambda: self._log.get(turn_id).status != "running", timeout)
            return self._log.get(turn_id)

    def watch(self, turn_id: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake` once when the turn is no longer running, from the thread that ends
        it (at once when it is not running now): for a caller that waits without a thread
        of its own (sessions/waits.py). `wake` must be quick and must not raise. Returns
        the call that forgets `wake`."""
        key = object()
        with self._cond:
            if self._log.running == turn_id:
                self._watchers[key] = (turn_id, wake)
                return lambda: self._forget(key)
        wake()
        return lambda: None

    def _forget(self, key: object) -> None:
        with self._cond:
            self._watchers.pop(key, None)

    def _wake_ended(self) -> None:
        """Wake the watchers of turns that no longer run (outside the lock: a wake may
        take a lock of its own)."""
        with self._cond:
            ended = [k for k, (turn, _) in self._watchers.items() if self._log.running != turn]
            wakes = [self._watchers.pop(k)[1] for k in ended]
        for wake in wakes:  # bounded by the calls waiting on this agent
            wake()

    def turns(self) -> list[TurnSnapshot]:
        with self._cond:
            return self._log.all()

    def _fold(self, fold: Callable[[TurnLog], None]) -> None:
        """Apply one event to the turns under the lock; wake whoever waits on a turn it ended."""
        with self._cond:
            running = self._log.running
            fold(self._log)
            self._cond.notify_all()
            ended = running is not None and self._log.running != running
        if ended:
            self._wake_ended()

    # -- plumbing --------------------------------------------------------------

    def _send(self, command: Mapping[str, object]) -> bool:
        # ensure_ascii keeps U+2028/U+2029 escaped, so the line framing is unambiguous.
        data = json.dumps(command).encode() + b"\n"
        stdin = self._proc.stdin
        with self._write_lock:
            if stdin is None or stdin.closed:
                return False
            try:
                stdin.write(data)
                stdin.flush()
            except (OSError, ValueError):
                return False
        return True

    def _read_stdout(self) -> None:
        stream = self._proc.stdout
        assert stream is not None
        try:
            while line := read_line(stream):
                self._take(line)
        finally:  # whatever ends the reader, no turn is left running
            self._ended()

    def _ended(self) -> None:
        # stderr is read to its end (or for a moment) so the reason is in hand.
        self._threads[1].join(timeout=2.0)
        lines = stderr_lines(self.stderr_tail())
        with self._cond:
            running = self._log.running is not None
            closing = self._closing
        if running and not closing:
            log.warning("%s (pid %d) exited during a turn; its stderr ended with:\n%s",
                        self.name, self._proc.pid, "\n".join(lines) or "(nothing)")  # fmt: skip
        elif lines and not closing:
            log.info("%s (pid %d) exited; its stderr ended with:\n%s", self.name,
                     self._proc.pid, "\n".join(lines))  # fmt: skip
        with self._cond:
            self._eof = True
            self._log.process_ended(time.time(), closing=closing)
            self._cond.notify_all()
        self._wake_ended()

    def _read_stderr(self) -> None:
        stream = self._proc.stderr
        assert stream is not None
        while chunk := os.read(stream.fileno(), 8192):
            with self._cond:
                self._stderr += chunk
                del self._stderr[:-STDERR_KEEP]

    def _close_stdin(self) -> None:
        with self._write_lock:
            try:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
            except OSError:
                pass  # the agent is gone already; closing was all we wanted

    def _signal(self, sig: signal.Signals) -> None:
        # The agent was started in its own session, so its pid is its process group id.
        signal_group(self._proc, sig)

    def _exited(self, timeout: float) -> bool:
        """Whether the process ended within timeout seconds (left unreaped: `close`)."""
        end = time.monotonic() + max(0.0, timeout)
        while not exited(self._proc):
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)
        return True


def stderr_lines(text: str, count: int = STDERR_LOG_LINES) -> list[str]:
    """The last lines of an agent's stderr, path- and secret-free, for the log."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return [sanitize(line)[:300] for line in lines[-count:]]


def _widen_pipe(stream: IO[bytes] | None) -> None:
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fcntl.fcntl(stream.fileno(), _F_SETPIPE_SZ, PIPE_SIZE)


def read_line(stream: IO[bytes]) -> bytes:
    """The next line (split on b"\\n" only); an overlong line is skipped whole."""
    while True:
        line = stream.readline(MAX_LINE)
        if not line or line.endswith(b"\n") or len(line) < MAX_LINE:
            return line
        while (rest := stream.readline(MAX_LINE)) and not rest.endswith(b"\n"):
            pass
        if not rest:
            return b""
