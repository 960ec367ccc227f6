"""The server's side of per-session egress: one process per session, never a shared loop.

`EgressSupervisor.open` forks a process for a session from its fork server (egress.forks,
started on first use), hands it its spec (the real credential goes through the pipe,
never argv or the environment) and returns once its socket listens. The process lowers
its own descriptor and memory limits (`egress.worker.confine`), so whatever one
session's agent does to its proxy (connections held open, endless header blocks)
exhausts that process only. Its audit records come back as lines on its stdout, read
by one thread per session.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import IO, Any, TypeVar

from writerpool import crash, proc
from writerpool.config.caps import Caps
from writerpool.config.providers import ResolvedProvider
from writerpool.egress.connect_model import DENIED_KEPT, ConnectRecord
from writerpool.egress.forks import Forked, ForkServer
from writerpool.egress.loop import InProcessLoop
from writerpool.egress.model import EgressRecord
from writerpool.egress.sockets import remove_stale_socket, unlink_socket
from writerpool.egress.spec import (
    MAX_LINE,
    CapsSpec,
    ConnectListenerSpec,
    ListenerSpec,
    ProviderListenerSpec,
    WorkerSpec,
)
from writerpool.errors import WriterpoolError

__all__ = ["PREFIX", "EgressSession", "EgressSupervisor"]

log = logging.getLogger(__name__)
T = TypeVar("T")

PREFIX = "/p"
OPEN_TIMEOUT = 30.0  # the fork server's start and imports, on a loaded host
STOP_TIMEOUT = 10.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def _token() -> str:
    while True:
        token = secrets.token_urlsafe(32)
        # pi treats an anthropic key containing this as an OAuth token.
        if "sk-ant-oat" not in token:
            return token


def _worker_env() -> dict[str, str]:
    env = proc.clean_env({
        "PYTHONPATH": _PACKAGE_ROOT,  # the same writerpool as this server's
        "MALLOC_ARENA_MAX": "2",  # glibc's per-thread arenas would eat the address space
    })  # fmt: skip
    if crash.ENV in os.environ:  # the crash-point suite reaches into the egress process
        env[crash.ENV] = os.environ[crash.ENV]
    return env


class EgressSession:
    """A session's egress process, seen from the server. Made by `EgressSupervisor.open`."""

    prefix = PREFIX

    def __init__(self, host: EgressSupervisor, spec: WorkerSpec, process: Forked) -> None:
        first = spec.listeners[0]
        assert isinstance(first, ProviderListenerSpec)  # the provider proxy comes first
        self.token = first.token
        self.session = spec.session
        self.writer = spec.writer
        self.socket_path = Path(spec.directory) / first.socket
        self._host = host
        self._process = process
        self._inodes: dict[str, int] = {}
        self._denied: dict[str, str] = {}  # the allowlist proxy's refusals, DENIED_KEPT
        self._ready = threading.Event()
        self._failure: WriterpoolError | None = None
        self._stopped = False
        self._reader = threading.Thread(target=self._read, name=f"egress-{spec.session}",
                                        daemon=True)  # fmt: skip

    @property
    def alive(self) -> bool:
        """Whether the session's egress process still runs and its socket is its own."""
        if self._stopped or self._process.ended() or _exiting(self._process.pid):
            return False
        try:
            return os.lstat(self.socket_path).st_ino == self._inodes.get(self.socket_path.name)
        except OSError:
            return False

    @property
    def denied(self) -> dict[str, str]:
        """Destinations the allowlist proxy refused in this session (at most DENIED_KEPT)
        and why; empty without an allowlist."""
        return dict(self._denied)

    @property
    def pid(self) -> int:
        return self._process.pid

    def base_url(self, port: int) -> str:
        """pi's `baseUrl` inside the writer, where the forwarder listens on `port`."""
        return f"http://127.0.0.1:{port}{self.prefix}"

    def stop(self) -> None:
        """Stop the process (requests in flight end), remove its sockets. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._send(b"stop\n")
            _close(self._process.stdin)
            if not self._process.wait(STOP_TIMEOUT):
                log.warning("egress: a session's proxy did not stop in time; killed")
                self._process.kill()
                self._process.wait(STOP_TIMEOUT)
            if self._reader.ident is not None:  # started (EgressSupervisor.open)
                self._reader.join(STOP_TIMEOUT)
        finally:
            self._process.release()
            self._host.forget(self)
            for name, inode in self._inodes.items():
                unlink_socket(self.socket_path.parent / name, inode)
            if not self._inodes:  # it died before saying which: nobody listens there now
                remove_stale_socket(self.socket_path)

    def _start(self, spec: WorkerSpec) -> None:
        self._reader.start()
        self._send(spec.model_dump_json().encode() + b"\n")

    def wait_ready(self) -> None:
        """Return once the socket listens; raise egress_failed (and stop) if it never will."""
        if not self._ready.wait(OPEN_TIMEOUT) and self._failure is None:
            self._failure = WriterpoolError("egress_failed", "the provider proxy did not start")
        if self._failure is not None:
            self.stop()
            raise self._failure

    def _send(self, data: bytes) -> None:
        stdin = self._process.stdin
        try:
            if stdin is not None:
                stdin.write(data)
                stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the process is gone; `alive` says so

    def _read(self) -> None:
        """Every line of the process's stdout until it ends (bounded by MAX_LINE each)."""
        stdout = self._process.stdout
        assert stdout is not None
        try:
            while line := stdout.readline(MAX_LINE):
                self._take(line)
        finally:
            _close(stdout)
            if not self._ready.is_set() and self._failure is None:
                self._failure = WriterpoolError("egress_failed", "the provider proxy ended")
            self._ready.set()

    def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
            (kind, body), *_ = message.items()
        except (ValueError, AttributeError):
            return
        if kind == "audit" and isinstance(body, dict):
            try:
                self._host.emit(EgressRecord(**body))
            except TypeError:
                log.warning("egress: an audit record from a session's proxy was malformed")
        elif kind == "connect" and isinstance(body, dict):
            self._take_connect(body)
        elif kind == "ready" and isinstance(body, dict):
            self._inodes = {str(k): int(v) for k, v in body.get("inodes", {}).items()}
            self._ready.set()
        elif kind == "failed" and isinstance(body, dict):
            message = str(body.get("message", "the provider proxy could not be opened"))
            self._failure = WriterpoolError("egress_failed", message[:300])
            self._ready.set()

    def _take_connect(self, body: dict[str, object]) -> None:
        try:
            record = ConnectRecord(**body)  # type: ignore[arg-type]
        except TypeError:
            log.warning("egress: an allowlist record from a session's proxy was malformed")
            return
        kept = record.destination in self._denied or len(self._denied) >= DENIED_KEPT
        if not record.allowed and not kept:
            self._denied[record.destination] = record.reason
        self._host.emit_connect(record)


def _exiting(pid: int) -> bool:
    """Killed but not yet reapable: a zombie leader waits for its threads to exit."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rpartition(b")")[2].split()[:1]
    except OSError:
        return True
    return state in ([b"Z"], [b"X"])


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()


class EgressSupervisor:
    """Starts and tracks the egress processes of this server's sessions."""

    def __init__(
        self,
        audit: Callable[[EgressRecord], None] | None = None,
        connect_audit: Callable[[ConnectRecord], None] | None = None,
    ) -> None:
        self._audit = audit
        self._connect_audit = connect_audit
        self._sessions: list[EgressSession] = []
        self._lock = threading.Lock()
        self._closed = False
        self._loop: InProcessLoop | None = None
        self._forks: ForkServer | None = None
        self._retired: list[ForkServer] = []  # replaced, reaping their children until close

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run a listener's coroutine on the server's own egress loop (made on first use):
        only for listeners not yet served by a session's egress process."""
        with self._lock:
            if self._closed:
                coro.close()
                raise WriterpoolError("egress_failed", "the provider proxy host is closed")
            if self._loop is None:
                self._loop = InProcessLoop()
            loop = self._loop
        return loop.run(coro, timeout)

    def open(
        self,
        *,
        session: str,
        writer: str | None,
        socket_path: Path,
        upstream: ResolvedProvider,
        credential: str,
        caps: Caps,
        wait: bool = True,
        connect: ConnectListenerSpec | None = None,
    ) -> EgressSession:
        """Start a session's egress process; returns once its socket (0600) listens, or at
        once with `wait=False` (the token is known: pi can start meanwhile; call
        `wait_ready` before the session is used). `connect`: the workspace's allowlist
        proxy, served by the same process."""
        listener = ProviderListenerSpec(
            socket=socket_path.name, token=_token(), provider=upstream.name,
            api=upstream.api.name, base_url=upstream.base_url, key_env=upstream.key_env,
            builtin=upstream.builtin, credential=credential, caps=CapsSpec.of(caps),
        )  # fmt: skip
        directory = str(socket_path.parent.absolute())
        listeners: tuple[ListenerSpec, ...] = (
            (listener,) if connect is None else (listener, connect)
        )
        spec = WorkerSpec(session=session, writer=writer, directory=directory,
                          listeners=listeners)  # fmt: skip
        process = self._fork()  # not under the lock: the fork server may be starting
        proxy = None
        with self._lock:
            if not self._closed:
                socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                proxy = EgressSession(self, spec, process)
                proxy._start(spec)  # under the lock: close() stops only started sessions
                self._sessions.append(proxy)
        if proxy is None:  # closed meanwhile: the child ends at the end of its stdin
            for stream in (process.stdin, process.stdout):
                _close(stream)
            process.release()
            raise WriterpoolError("egress_failed", "the provider proxy host is closed")
        if wait:
            proxy.wait_ready()
        return proxy

    def start_ahead(self) -> None:
        """Start the fork server now (the warm pool's writers will claim sessions), so
        that no session's start waits for its start and imports. Nothing once closed."""
        with contextlib.suppress(WriterpoolError):  # closed: the server is shutting down
            self._fork_server()

    def _fork_server(self) -> ForkServer:
        """The fork server of this environment, started (again) when there is none or it
        cannot serve: a server's environment can change (its CA variables), and a fork
        server killed by another hand is named. One replaced while it runs is kept until
        close(): it reaps its children as their sessions end."""
        env = _worker_env()
        with self._lock:
            if self._closed:
                raise WriterpoolError("egress_failed", "the provider proxy host is closed")
            forks, ended = self._forks, None
            if forks is not None and not forks.running():
                log.warning("egress: the fork server (pid %d) ended on its own", forks.pid)
                forks, ended = None, forks
            elif forks is not None and (forks.broken or forks.env != env):
                self._retired.append(forks)  # bounded by failures and environment changes
                forks = None
            if forks is None:
                forks = self._forks = ForkServer(env)
        if ended is not None:
            ended.close()  # already ended: this only reaps it
        return forks

    def _fork(self) -> Forked:
        """A new egress process; once more from a new fork server when the running one
        did not answer (it ended as it was asked, say)."""
        forks = self._fork_server()
        try:
            return forks.fork()
        except WriterpoolError as exc:
            if not forks.broken:
                raise  # it answered: it could not fork (out of memory or processes)
            log.warning("egress: the fork server (pid %d) failed: %s; starting another",
                        forks.pid, exc.message)  # fmt: skip
            return self._fork_server().fork()

    def forget(self, proxy: EgressSession) -> None:
        with self._lock:
            if proxy in self._sessions:
                self._sessions.remove(proxy)

    def emit(self, record: EgressRecord) -> None:
        if self._audit is not None:
            try:
                self._audit(record)
            except (OSError, ValueError) as exc:  # an audit failure never ends a session
                log.warning("egress: an audit record could not be written: %s", exc)

    def emit_connect(self, record: ConnectRecord) -> None:
        if self._connect_audit is not None:
            try:
                self._connect_audit(record)
            except (OSError, ValueError) as exc:  # an audit failure never ends a session
                log.warning("egress: an allowlist audit record could not be written: %s", exc)

    def close(self) -> None:
        """Stop every session's egress process (their sockets removed)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions, self._sessions = self._sessions, []
            servers = [*self._retired, *filter(None, [self._forks])]
            self._forks, self._retired = None, []
        try:
            for proxy in sessions:
                try:
                    proxy.stop()
                except Exception:  # the others still stop, and the fork servers end
                    log.exception("egress: a session's proxy did not stop cleanly")
        finally:
            for server in servers:  # after their children: they reap them as they end
                server.close()
            if self._loop is not None:
                self._loop.close()
