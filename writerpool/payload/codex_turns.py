"""Codex's turns inside a writer: one `codex exec --json` process per prompt.

Runs in the session's container as `python3 -I -S codex_turns.py CODEX_DIR GRACE --
CODEX...`
(standard library only). The host writes it into the agent directory (agent/codex.py),
which a writer mounts read-only, so nothing in the writer can change it; the host's
CodexAgent speaks to it on stdin and reads stdout.

CODEX_DIR is the agent directory's `codex/`: `config.toml` (no key in it) is copied
into CODEX_HOME, $HOME/.codex (on the container's tmpfs, where Codex keeps the thread a
resumed turn reads; Codex's sandbox keeps the commands it runs from writing there),
and `key` (the per-session token, or the provider's key on an open network) becomes
WRITERPOOL_SESSION_TOKEN in the environment of each `codex` process alone: never in an
argv.

stdin, one JSON object a line:
  {"run": {"id": ID, "prompt": TEXT, "thread": THREAD or null}}
      runs `CODEX... [resume THREAD] -` with TEXT on its stdin (no prompt in an argv,
      none over the kernel's 128 KiB limit of one argument);
  {"abort": ID}
      SIGINT to that turn's process (Codex ends the turn and exits 130), SIGKILL to
      its process group if it has not ended GRACE seconds later.
stdout: `{"type": "writerpool.ready"}` once set up, then each process's own lines (it
inherits this stdout), and once it has ended `{"type": "writerpool.exited", "id": ID,
"status": N}` on a line of its own. End of stdin (or SIGTERM) kills a running turn's
process group and ends this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess  # noqa: TID251 - runs inside the container, not on the host
import sys
import threading
from types import FrameType
from typing import Any

TOKEN_VARIABLE = "WRITERPOOL_SESSION_TOKEN"  # noqa: S105 - a variable's name
READY = "writerpool.ready"
PR_SET_DUMPABLE = 4  # linux/prctl.h
EXITED = "writerpool.exited"


def emit(event: dict[str, object]) -> None:
    # A line of its own even after a process killed in the middle of one.
    data = b"\n" + json.dumps(event).encode() + b"\n"
    while data:
        data = data[os.write(1, data) :]


class Turns:
    """The one running turn: started on a thread of its own, interrupted from the reader."""

    def __init__(self, codex_dir: str, command: list[str], grace: float) -> None:
        self.codex_dir = codex_dir
        self.command = command
        self.grace = grace
        self.lock = threading.Lock()
        self.id: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.aborted = False
        self.thread: threading.Thread | None = None

    def run(self, request: dict[str, Any]) -> None:
        if self.thread is not None:
            self.thread.join()  # the host sends a turn only after the last one ended
        turn_id = str(request.get("id"))
        thread = request.get("thread")
        argv = [*self.command, *(["resume", thread] if isinstance(thread, str) else []), "-"]
        with self.lock:
            self.id, self.proc, self.aborted = turn_id, None, False
        prompt = str(request.get("prompt", "")).encode("utf-8", "replace")
        self.thread = threading.Thread(target=self._turn, args=(turn_id, argv, prompt))
        self.thread.start()

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        try:
            with open(os.path.join(self.codex_dir, "key"), encoding="utf-8") as key:
                env[TOKEN_VARIABLE] = key.read().strip()
        except OSError:
            env.pop(TOKEN_VARIABLE, None)  # `none` networking: no key at all
        return env

    def _turn(self, turn_id: str, argv: list[str], prompt: bytes) -> None:
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, env=self._environment(), start_new_session=True
            )
        except OSError as exc:
            print(f"codex-turns: {argv[0]} did not start ({exc.strerror})", file=sys.stderr)
            emit({"type": EXITED, "id": turn_id, "status": 127})
            return
        with self.lock:
            self.proc = proc
            interrupt = self.aborted
        if interrupt:
            self._interrupt(proc)
        assert proc.stdin is not None
        with contextlib.suppress(OSError):  # it ended unread: its status says how
            proc.stdin.write(prompt)
            proc.stdin.close()
        status = proc.wait()
        with self.lock:
            self.proc = None
        reap_orphans()
        emit({"type": EXITED, "id": turn_id, "status": status})

    def abort(self, turn_id: str) -> None:
        with self.lock:
            if turn_id != self.id:
                return
            self.aborted = True
            proc = self.proc
        if proc is not None:
            self._interrupt(proc)

    def _interrupt(self, proc: subprocess.Popen[bytes]) -> None:
        _signal(proc.pid, signal.SIGINT)
        timer = threading.Timer(self.grace, self._kill, args=(proc,))
        timer.daemon = True
        timer.start()

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        with self.lock:
            running = self.proc is proc  # not yet waited for: its pid is still its own
        if running:
            _signal(-proc.pid, signal.SIGKILL)

    def end(self) -> None:
        with self.lock:
            proc = self.proc
        if proc is not None:
            _signal(-proc.pid, signal.SIGKILL)
        if self.thread is not None:
            self.thread.join(timeout=10.0)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def reap_orphans() -> None:
    """As the container's PID 1 (no egress forwarder), reap what a turn left behind.
    Called only when no turn's process is running, so none of ours is taken."""
    if os.getpid() != 1:
        return
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def prepare(codex_dir: str, command: list[str]) -> str | None:
    """Set up CODEX_HOME (every Codex process inherits it); the reason it cannot be, or None."""
    if not os.environ.get("HOME"):
        return "HOME is not set"
    home = os.environ["CODEX_HOME"] = os.path.join(os.environ["HOME"], ".codex")
    if shutil.which(command[0]) is None:
        return f"{command[0]} is not in this image"
    try:
        os.makedirs(home, mode=0o700, exist_ok=True)
        shutil.copyfile(os.path.join(codex_dir, "config.toml"), os.path.join(home, "config.toml"))
    except OSError as exc:
        return f"{home} cannot be prepared ({exc.strerror})"
    return None


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def not_dumpable() -> str | None:
    """Make this process not dumpable, as an execute-only binary is: no command Codex
    runs (same uid, no capabilities) can then open this process's /proc/PID/fd and
    write a forged turn to the host. Else why not."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            return f"prctl: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"prctl: {exc}"
    return None


def main(argv: list[str]) -> int:
    try:
        grace = float(argv[2])
    except (IndexError, ValueError):
        grace = -1.0
    if len(argv) < 5 or argv[3] != "--" or not 0 <= grace <= 600:
        print("usage: codex_turns.py CODEX_DIR GRACE -- CODEX...", file=sys.stderr)
        return 2
    codex_dir, command = argv[1], argv[4:]
    why = not_dumpable() or prepare(codex_dir, command)
    if why is not None:
        print(f"codex-turns: {why}", file=sys.stderr)
        return 127
    signal.signal(signal.SIGTERM, _stop)
    turns = Turns(codex_dir, command, grace)
    emit({"type": READY})
    try:
        for line in sys.stdin.buffer:
            try:
                request = json.loads(line)
            except ValueError:
                continue
            if not isinstance(request, dict):
                continue
            if isinstance(request.get("run"), dict):
                turns.run(request["run"])
            elif "abort" in request:
                turns.abort(str(request["abort"]))
    finally:
        turns.end()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
