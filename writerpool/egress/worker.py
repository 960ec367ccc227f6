"""One session's egress process, forked by `python -m writerpool.egress.worker
--fork-server FD` (egress.forks).

Every listener that serves one session's egress (the provider proxy; the CONNECT
allowlist proxy) runs here, in a process of its own with its own descriptor and
memory limits, so a session that exhausts them fails itself and never the server or
another session. The process reads its `WorkerSpec` from stdin, works inside the
session's egress directory (sockets are bound by relative name, so no host path
appears in `/proc/net/unix` inside a container), answers `ready` on stdout, streams
audit records, and stops on `stop` or at the end of stdin: when the server dies, its
egress processes remove their sockets and end.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import resource
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Protocol

from pydantic import ValidationError

from writerpool.crash import crash_point
from writerpool.egress.connect import ConnectSession
from writerpool.egress.connect_model import ConnectRecord
from writerpool.egress.forks import FLAG, serve_forks
from writerpool.egress.gate import GateLimits
from writerpool.egress.model import EgressRecord
from writerpool.egress.proxy import ProviderProxy
from writerpool.egress.sockets import unlink_socket
from writerpool.egress.spec import (
    MAX_LINE,
    ConnectListenerSpec,
    ListenerSpec,
    ProviderListenerSpec,
    WorkerSpec,
)
from writerpool.egress.watchdog import arm, watch
from writerpool.errors import WriterpoolError

log = logging.getLogger("writerpool.egress")

# Descriptors: each listener's connections (the provider's: client and upstream; the
# allowlist proxy's: those and a splice pipe each way, plus connections being refused
# past its cap) and a margin for the interpreter, the pipes and TLS. Memory: the address
# space one session's proxy may map; a Python process with aiohttp and ssl maps about
# 60 MiB when idle and every open connection is bounded by the gate.
NOFILE_BASE = 64
CONNECT_FDS = 6  # agent, upstream, and two pipes of two ends (egress.relay)
CONNECT_REFUSING = 64
ADDRESS_SPACE = 1024 * 1024 * 1024
# A thread's stack, reserved in that address space: the allowlist proxy runs a thread
# per direction of each open tunnel (egress.relay), at most 128 of them.
THREAD_STACK = 512 * 1024


class Listener(Protocol):
    """One listener of a session's egress process."""

    async def start(self) -> int:
        """Listen (on a socket name in the working directory); return its inode."""
        ...

    async def stop(self) -> None: ...


Emit = Callable[[EgressRecord | ConnectRecord], None]
ListenerFactory = Callable[[ListenerSpec, WorkerSpec, Emit], Listener]


def _provider(spec: ListenerSpec, worker: WorkerSpec, emit: Emit) -> Listener:
    assert isinstance(spec, ProviderListenerSpec)
    return ProviderProxy(spec, session=worker.session, writer=worker.writer, emit=emit)


def _connect(spec: ListenerSpec, worker: WorkerSpec, emit: Emit) -> Listener:
    assert isinstance(spec, ConnectListenerSpec)
    return ConnectSession.from_spec(spec, session=worker.session, writer=worker.writer,
                                    audit=emit)  # fmt: skip


# A listener kind's spec (`egress.spec`) and how to make it: the place a new kind plugs in.
LISTENERS: dict[str, ListenerFactory] = {"provider": _provider, "connect": _connect}


def nofile_limit(spec: WorkerSpec) -> int:
    total = NOFILE_BASE
    for listener in spec.listeners:
        if isinstance(listener, ConnectListenerSpec):
            total += CONNECT_FDS * listener.concurrent + CONNECT_REFUSING
        else:
            total += 2 * GateLimits().connections
    return total


def confine(spec: WorkerSpec) -> None:
    """Lower this process's own limits (never raised again: the hard limits go too)."""
    nofile = nofile_limit(spec)
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    threading.stack_size(THREAD_STACK)
    os.chdir(spec.directory)


class _Out:
    """JSON lines to the server; one writer at a time (the loop and the stop path)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, kind: str, body: dict[str, object]) -> None:
        line = json.dumps({kind: body}, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            try:
                self._stream.write(line)
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # the server is gone; stdin's end stops us

    def audit(self, record: EgressRecord | ConnectRecord) -> None:
        kind = "connect" if isinstance(record, ConnectRecord) else "audit"
        self.send(kind, dataclasses.asdict(record))


async def serve(spec: WorkerSpec, out: _Out, stop: asyncio.Event) -> None:
    listeners: list[tuple[str, Listener, int]] = []
    try:
        for item in spec.listeners:
            listener = LISTENERS[item.kind](item, spec, out.audit)
            inode = await listener.start()
            listeners.append((item.socket, listener, inode))
        out.send("ready", {"inodes": {name: inode for name, _, inode in listeners}})
        await stop.wait()
        crash_point("egress.worker_stopping")
    finally:
        for name, listener, inode in reversed(listeners):
            try:
                await listener.stop()
            finally:
                unlink_socket(Path(name), inode)


def _watch_stdin(stdin: IO[bytes], loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Set `stop` on a `stop` line or at the end of stdin (the server closed it or died)."""
    while True:
        line = stdin.readline(MAX_LINE)
        if not line or line.strip() == b"stop":
            break
    with contextlib.suppress(RuntimeError):  # the loop closed first: it stopped already
        loop.call_soon_threadsafe(stop.set)


class LoopErrors:
    """The loop's error handler: the first unhandled error of a session is logged with
    its traceback, the rest counted. Whatever an agent can make fail, it can make fail
    again and again, and this process writes on the server's own stderr."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        self.count += 1
        if self.count == 1:
            loop.default_exception_handler(context)

    def summary(self) -> None:
        if self.count > 1:
            log.warning("egress: %d errors in the session's proxy in all", self.count)


async def _main(spec: WorkerSpec, out: _Out) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    errors = LoopErrors()
    loop.set_exception_handler(errors)
    threading.Thread(target=_watch_stdin, args=(sys.stdin.buffer, loop, stop), daemon=True,
                     name="egress-stdin").start()  # fmt: skip
    watching = watch(loop)  # a writer's socket lingering in a close ends (egress.watchdog)
    try:
        await serve(spec, out, stop)
    finally:
        watching.set()
        errors.summary()


def main() -> int:
    """The fork server (`--fork-server FD`): every import above is done once, here."""
    if sys.argv[1:2] != [FLAG] or len(sys.argv) != 3 or not sys.argv[2].isdigit():
        print(f"usage: python -m writerpool.egress.worker {FLAG} FD", file=sys.stderr)
        return 2
    return serve_forks(int(sys.argv[2]), session)


def session() -> int:
    """A forked child's life: one session's spec from stdin, served until `stop`."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="writerpool: %(message)s")
    out = _Out(sys.stdout.buffer)
    line = sys.stdin.buffer.readline(MAX_LINE)
    if not line:  # its host ended before a session took it: nothing to say to anyone
        return 0
    try:
        spec = WorkerSpec.model_validate_json(line)
        confine(spec)
        arm()
        asyncio.run(_main(spec, out))
    except ValidationError:
        out.send("failed", {"code": "egress_failed", "message": "the egress spec is invalid"})
        return 2
    except WriterpoolError as exc:
        out.send("failed", {"code": exc.code, "message": exc.message})
        return 1
    except OSError as exc:
        out.send("failed", {"code": "egress_failed", "message": f"egress: {exc.strerror}"})
        return 1
    out.send("stopped", {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
