"""`writerpool service run`: the service process. The session core with its settings
reloaded and its warm writers kept, served over MCP streamable HTTP (mcp/http.py) on
127.0.0.1 and on a Unix socket in the user's runtime directory, behind the Guard."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import platformdirs
import uvicorn

from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.paths import APP, Paths
from writerpool.errors import WriterpoolError
from writerpool.mcp.http import streamable_http
from writerpool.mcp.server import build_server
from writerpool.proc import started
from writerpool.service.conns import BoundedH11
from writerpool.service.guard import Guard
from writerpool.sessions import reload
from writerpool.sessions.calls import ToolService
from writerpool.state.service_record import (
    failure_file,
    port_file,
    record_file,
    recorded_port,
    url_of,
)

log = logging.getLogger(__name__)

# How long a stop waits for open streams before it closes them.
GRACEFUL_SECONDS = 5.0


def socket_path(paths: Paths) -> Path:
    """In the user's runtime directory, named after the state directory it serves (two
    installs of one user, a test's and the real one, never share a socket)."""
    tag = hashlib.sha256(str(paths.state_dir).encode()).hexdigest()[:12]
    return Path(platformdirs.user_runtime_dir(APP)) / f"service-{tag}.sock"


def _tcp_socket(port: int) -> socket.socket:
    # Loopback only, by construction: there is no option for any other address.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise WriterpoolError(
            "service_port_taken", f"127.0.0.1:{port} is not free ({exc.strerror})"
        ) from exc
    sock.listen(128)
    return sock


def _listen(paths: Paths, configured: int, requested: int | None) -> socket.socket:
    """The port asked for (`service start --port`), else the configured one, else the
    one chosen before, else a free one; unless configured, recorded 0600 for next time.
    A taken port is refused, never replaced by another: the clients registered with its
    URL would go on sending their requests (and tokens, were it not for the header
    helper's check) to whoever holds it."""
    port = requested if requested is not None else configured or recorded_port(paths) or 0
    sock = _tcp_socket(port)
    if not configured:
        ensure_private_dir(paths.service_dir)
        write_atomic(port_file(paths), str(sock.getsockname()[1]).encode(), mode=0o600)
    return sock


def _failed(paths: Paths, exc: WriterpoolError) -> None:
    ensure_private_dir(paths.service_dir)
    data = json.dumps({"code": exc.code, "message": exc.message}).encode()
    write_atomic(failure_file(paths), data, mode=0o600)


def _unix_socket(path: Path) -> socket.socket:
    ensure_private_dir(path.parent)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a socket a killed service left
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


@contextlib.contextmanager
def _recorded(paths: Paths, port: int, unix: Path) -> Iterator[None]:
    """The 0600 record `service status` and `start` read, removed when the service ends."""
    ensure_private_dir(paths.service_dir)
    record = {"schema_version": 1, "pid": os.getpid(), "started": started(os.getpid()),
              "port": port, "url": url_of(port), "socket": str(unix)}  # fmt: skip
    write_atomic(record_file(paths), json.dumps(record, sort_keys=True).encode(), mode=0o600)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            record_file(paths).unlink()
        with contextlib.suppress(FileNotFoundError):
            unix.unlink()


class _Signals:
    """SIGTERM/SIGINT before uvicorn handles them (the record, which `service stop`
    reads, is written first) or after it stopped: noted, never lost."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, signum: int, frame: object) -> None:
        log.info("signal %d: closing sessions", signum)
        self.seen.append(signum)


async def _serve(server: Any, sockets: list[socket.socket], early: _Signals) -> None:
    """uvicorn's serve; a signal that came before it took over stops it once started."""

    async def honour_early() -> None:
        while not server.started:  # bounded: uvicorn starts or serve() ends the group
            await anyio.sleep(0.05)
        if early.seen:
            server.should_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(honour_early)
        await server.serve(sockets=sockets)
        tg.cancel_scope.cancel()


async def run_service(paths: Paths, configured: int, requested: int | None = None) -> None:
    """Serve until SIGTERM or SIGINT; then close every session, as `serve` does.
    `configured`: config.toml's port (0: none); `requested`: `service start --port`."""
    try:
        tcp = _listen(paths, configured, requested)
    except WriterpoolError as exc:
        _failed(paths, exc)
        raise
    unix_path = socket_path(paths)
    unix = _unix_socket(unix_path)
    reload.clear(paths)
    service = ToolService(paths, reload=True)
    transport = streamable_http(build_server(service))
    app: Any = Guard(transport.handle_request, paths)
    # BoundedH11: a deadline on each request head and a cap on connections waiting for one.
    config = uvicorn.Config(
        app,
        http=BoundedH11,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(GRACEFUL_SECONDS),
    )
    # uvicorn stops on SIGTERM/SIGINT, then raises the signal again under the handler it
    # found: noted only, so the sessions are closed below instead of the process dying.
    early = _Signals()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, early)
    try:
        with _recorded(paths, tcp.getsockname()[1], unix_path):
            async with transport.run():
                await _serve(uvicorn.Server(config), [tcp, unix], early)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(service.shutdown)
        tcp.close()
        unix.close()
        reload.clear(paths)
