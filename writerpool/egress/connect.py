"""The per-session allowlist proxy: a Unix socket in, listed hosts out.

It answers `CONNECT host:port` (TLS passes through untouched: no interception) and,
for `http://` entries only, plain HTTP requests in absolute form (one request per
connection). A tunnel's first bytes must be a ClientHello naming the CONNECT's name
(`egress.clienthello`), sent on unchanged; else it is refused, nothing sent upstream.
A head `egress.head` refuses (malformed, ambiguous, or followed by a second request)
is answered 400, audited as `bad_request`, and nothing goes upstream.
A name is checked against the session's allowlist before any lookup (its configured
entries, then the session-scoped ones `writerpool egress allow` added, `egress.grants`,
read at each decision they are needed for), then resolved
once (`egress.resolve`, the function `egress check` uses too), every address judged,
and the proxy connects to an address it checked (its record names that address, or
the one refused): a name that resolves elsewhere later changes nothing. A refusal is a
403 whose status line names the host. One record per connection. The in-writer
forwarder hands the agent's own socket over where it can (`egress.handoff`).
A connection ends when either side ends it (`egress.relay`): an agent that closes its
side closes the upstream half too, and stops counting against the caps at once.
Caps per session: connections in total and at once, header bytes, a deadline for the
header block, an idle timeout on open tunnels. It is a listener of the session's
egress process (`egress.worker`), beside the provider proxy and confined like it; the
isolation control, benches and tests run it on a loop of their own (`LocalListener`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from writerpool.config.allow_entry import normalize_host
from writerpool.egress import clienthello as ch
from writerpool.egress import connect_model as cm
from writerpool.egress import handoff
from writerpool.egress import sockets as wire
from writerpool.egress.allowlist import Allowlist, Decision, expand
from writerpool.egress.connect_model import DENIED_KEPT, ConnectLimits, ConnectRecord, Request
from writerpool.egress.grants import GrantWatch
from writerpool.egress.head import BadRequest, head_end, parse_request
from writerpool.egress.loop import LocalListener as _LocalListener
from writerpool.egress.relay import Relayed, relay
from writerpool.egress.resolve import Lookup, Resolution, resolve, static_answers, system_lookup
from writerpool.egress.sockets import answer, dial, listening_socket, unlink_socket
from writerpool.egress.spec import ConnectListenerSpec

__all__ = ["ConnectLimits", "ConnectSession", "LocalListener"]

log = logging.getLogger(__name__)

RESOLVE_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0
AUDIT_PAST_CAP = 100
ACCEPT_PAUSE = 0.1
# accept() errors that mean "out of a resource": wait, the resource comes back.
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass
class _Connection:
    started: float = field(default_factory=time.monotonic)
    method: str = "?"
    destination: str = "<refused>"
    decision: Decision = field(default_factory=lambda: Decision(False, cm.BAD_REQUEST))
    address: str | None = None
    sni: str | None = None
    until: float | None = None  # the session-scoped entry that allowed it ends then
    allowlist: Allowlist | None = None  # the one decided with (session entries included)
    relayed: Relayed = field(default_factory=Relayed)  # bytes each way, set by the relay
    handed: socket.socket | None = None  # the agent's own socket, handed over by the writer


class ConnectSession:
    """One session's allowlist proxy on its own socket."""

    def __init__(
        self,
        *,
        session: str,
        writer: str | None,
        socket_path: Path,
        allowlist: Allowlist,
        resolve: Mapping[str, tuple[str, ...]],
        limits: ConnectLimits,
        audit: Callable[[ConnectRecord], None] | None = None,
        lookup: Lookup = system_lookup,
        grants: GrantWatch | None = None,
    ) -> None:
        self.session = session
        self.writer = writer
        self.socket_path = socket_path
        self.allowlist = allowlist
        self.limits = limits
        self._resolve = dict(resolve)
        self._lookup = lookup
        self._grants = grants  # session-scoped entries (`writerpool egress allow`)
        self._audit = audit
        self._listening: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._inode: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._count = 0
        self._active = 0
        self._handoffs = 0
        self._denied: dict[str, str] = {}

    @property
    def denied(self) -> dict[str, str]:
        """Destinations refused so far (at most DENIED_KEPT) and why."""
        return dict(self._denied)

    @property
    def active(self) -> int:
        """Connections counted against the concurrency cap now."""
        return self._active

    @property
    def handoffs(self) -> int:
        """Connections whose agent socket the writer's forwarder handed over."""
        return self._handoffs

    @classmethod
    def from_spec(
        cls,
        spec: ConnectListenerSpec,
        *,
        session: str,
        writer: str | None,
        audit: Callable[[ConnectRecord], None],
    ) -> ConnectSession:
        """The listener a session's egress process serves for its spec."""
        limits = ConnectLimits(spec.concurrent, spec.total, spec.header_bytes,
                               spec.header_seconds, spec.idle_seconds)  # fmt: skip
        grants = GrantWatch(Path(spec.grants), session) if spec.grants else None
        return cls(session=session, writer=writer, socket_path=Path(spec.socket),
                   allowlist=Allowlist(expand(spec.entries, {})[0]), resolve=spec.resolve,
                   limits=limits, audit=audit, grants=grants)  # fmt: skip

    async def start(self) -> int:
        """Listen on the socket (a name in the working directory); returns its inode."""
        self._listening, self._inode = listening_socket(self.socket_path)
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())
        return self._inode

    async def stop(self) -> None:
        """Stop listening, end open tunnels, remove the socket."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._tasks):  # bounded: the connections open now
            task.cancel()
        waited = [t for t in (self._accepting, *self._tasks) if t is not None]
        if waited:
            await asyncio.wait(waited, timeout=STOP_TIMEOUT / 2)
        if self._listening is not None:
            self._listening.close()
        self._listening = self._accepting = None
        unlink_socket(self.socket_path, self._inode)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listening is not None
        while True:
            try:
                conn, _ = await loop.sock_accept(self._listening)
            except OSError as exc:
                if exc.errno not in EXHAUSTED:
                    raise
                log.warning("egress: the allowlist proxy cannot accept (%s); waiting",
                            errno.errorcode.get(exc.errno or 0, "?"))  # fmt: skip
                await asyncio.sleep(ACCEPT_PAUSE)
                continue
            conn.setblocking(False)
            task = loop.create_task(self._accept(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # -- one connection ----------------------------------------------------------------

    async def _accept(self, peer: socket.socket) -> None:
        self._count += 1
        self._active += 1
        conn = _Connection()
        try:
            await self._serve(peer, conn)
        except (ConnectionError, OSError):
            pass  # the agent's side went away; the record says how far it got
        finally:
            self._active -= 1  # before anything else: the cap is free again at once
            peer.close()
            if conn.handed is not None:
                conn.handed.close()
            self._emit(conn)

    async def _serve(self, peer: socket.socket, conn: _Connection) -> None:
        cap = self._cap_refusal()
        if cap is not None:
            conn.decision = Decision(False, cap)
            await answer(peer, cm.refusal_head(429, "-", cap))
            return
        parsed = await self._read_request(peer, conn)
        if parsed is None:
            return
        request, early = parsed
        agent = conn.handed or peer
        conn.method = request.method
        name = normalize_host(request.host)
        conn.destination = request.destination if name is not None else "<refused>"
        conn.decision = self._decide(request, conn)
        if not conn.decision.allowed:
            await self._refuse(agent, conn, 403)
            return
        upstream = await self._open(name or request.host, request.port, conn)
        if upstream is None:
            unreachable = conn.decision.reason in (cm.UPSTREAM_FAILED, cm.RESOLVE_FAILED)
            await self._refuse(agent, conn, 502 if unreachable else 403)
            return
        try:
            await self._relay(request, early, agent, upstream, conn)
        finally:
            upstream.close()  # whichever side ended it, both halves end now

    def _decide(self, request: Request, conn: _Connection) -> Decision:
        """The configured entries decide; what they refuse, a live session-scoped entry
        may allow (read at this decision: an entry added a moment ago counts)."""
        conn.allowlist = self.allowlist
        decision = self.allowlist.decide(request.host, request.port, request.scheme)
        if decision.allowed or self._grants is None:
            return decision
        live = self._grants.live()
        if not live.entries:
            return decision
        conn.allowlist = Allowlist((*self.allowlist.entries, *live.entries))
        widened = conn.allowlist.decide(request.host, request.port, request.scheme)
        conn.until = live.until_of(widened.entry) if widened.allowed else None
        return widened

    def _cap_refusal(self) -> str | None:
        if self._count > self.limits.total:
            return cm.CAP_CONNECTIONS
        if self._active > self.limits.concurrent:
            return cm.CAP_CONCURRENT
        return None

    async def _read_request(
        self, peer: socket.socket, conn: _Connection
    ) -> tuple[Request, bytes] | None:
        """The request and what came with it (from `conn.handed` if set), or None once refused."""
        agent, reason = peer, cm.BAD_REQUEST
        try:
            async with asyncio.timeout(self.limits.header_seconds):  # no task of its own
                conn.handed, data = await handoff.first_read(peer, self.limits.header_bytes)
                agent = conn.handed or peer  # handed over: the forwarder has left the path
                self._handoffs += conn.handed is not None
                data = await self._head(agent, data)
            return parse_request(data)
        except handoff.HandoffRefused:
            reason = handoff.HANDOFF_REFUSED
        except asyncio.LimitOverrunError:
            reason = cm.HEADER_TOO_LARGE
        except BadRequest:
            pass
        except TimeoutError:
            conn.decision = Decision(False, cm.HEADER_TIMEOUT)
            return None
        conn.decision = Decision(False, reason)
        await answer(agent, cm.refusal_head(400, "-", reason))
        return None

    async def _head(self, agent: socket.socket, data: bytes) -> bytes:
        """Bytes read until the head's end (and whatever came with it), from `data` on."""
        searched, limit = 0, self.limits.header_bytes
        while (end := head_end(data, searched)) is None and len(data) < limit:
            searched = len(data)
            chunk = await wire.receive(agent, limit)
            if not chunk:
                raise ConnectionResetError("the agent ended before its head did")
            data += chunk
        if end is None or end > limit:
            raise asyncio.LimitOverrunError("no end of the head within its bytes", len(data))
        return data

    async def _refuse(self, agent: socket.socket, conn: _Connection, status: int) -> None:
        self._note_denied(conn)
        await answer(agent, cm.refusal_head(status, conn.destination, conn.decision.reason))

    def _note_denied(self, conn: _Connection) -> None:
        if conn.destination not in self._denied and len(self._denied) < DENIED_KEPT:
            self._denied[conn.destination] = conn.decision.reason

    async def _resolution(self, host: str, port: int, conn: _Connection) -> Resolution:
        """The name's answers, judged; asked of the resolver (off the loop) only when
        neither an address nor `[egress.resolve]` gives them."""
        ranges = (conn.allowlist or self.allowlist).ranges
        args = (host, port, self._resolve, ranges, self._lookup)
        if static_answers(host, self._resolve) is not None:
            return resolve(*args)
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(None, resolve, *args),
                                          RESOLVE_TIMEOUT)  # fmt: skip
        except TimeoutError:
            return Resolution("resolver", (), "timed out")

    async def _open(self, host: str, port: int, conn: _Connection) -> socket.socket | None:
        """A connection to an address of `host` that passed, or None with the reason and
        the address refused (or last tried) in `conn`."""
        entry = conn.decision.entry
        resolution = await self._resolution(host, port, conn)
        refused = resolution.refused
        if refused is not None:
            conn.address = str(refused.address)
            conn.decision = Decision(False, refused.refusal or cm.RESOLVE_FAILED, entry)
            return None
        if not resolution.usable:
            conn.decision = Decision(False, cm.RESOLVE_FAILED, entry)
            return None
        for address in resolution.usable:  # bounded: one resolution's answers
            conn.address = str(address)
            opened = await dial(address, port)
            if opened is not None:
                return opened
        conn.decision = Decision(False, cm.UPSTREAM_FAILED, entry)
        return None

    async def _relay(
        self,
        request: Request,
        early: bytes,
        agent: socket.socket,
        upstream: socket.socket,
        conn: _Connection,
    ) -> None:
        """`early` came with the head: the body's start, or the tunnel's first bytes."""
        loop = asyncio.get_running_loop()
        body: int | None = None
        if request.scheme == "https":
            await asyncio.wait_for(wire.send_all(agent, cm.ESTABLISHED), wire.ANSWER_TIMEOUT)
            first = await self._hello(agent, early, request.host, conn)
            if first is None:
                return
        else:
            first = cm.origin_head(request) + early
            body = request.body - len(early)
        await loop.sock_sendall(upstream, first)
        conn.relayed.up.moved += len(first)
        await relay(agent, upstream, self.limits.idle_seconds, body, conn.relayed)

    async def _hello(
        self, agent: socket.socket, early: bytes, name: str, conn: _Connection
    ) -> bytes | None:
        """The tunnel's first bytes, once they hold a ClientHello for `name` (the name
        checked); None once refused, with nothing sent upstream."""
        data = bytearray(early)
        try:
            async with asyncio.timeout(self.limits.header_seconds):
                hello = await wire.read_hello(agent, data)
            conn.sni = hello.server_name
            reason = ch.name_refusal(hello, name)
        except ch.HelloRefused as refused:
            reason = refused.reason
        except TimeoutError:
            reason = cm.HELLO_TIMEOUT
        if reason is None:
            return bytes(data)
        conn.decision = Decision(False, reason, conn.decision.entry)
        self._note_denied(conn)
        if reason == ch.NOT_TLS:  # perhaps plain HTTP in the tunnel: say it in words
            await answer(agent, cm.refusal_head(403, conn.destination, reason))
        else:
            await answer(agent, cm.hello_alert(reason))
        return None

    def _emit(self, conn: _Connection) -> None:
        # Past the connection cap only so many refusals are audited: an agent cannot
        # grow the audit log without bound.
        if self._audit is None or self._count > self.limits.total + AUDIT_PAST_CAP:
            return
        record = ConnectRecord(
            session=self.session, writer=self.writer, method=conn.method,
            destination=conn.destination, allowed=conn.decision.allowed,
            reason=conn.decision.reason, entry=conn.decision.entry, address=conn.address,
            bytes_up=conn.relayed.up.moved, bytes_down=conn.relayed.down.moved,
            duration_ms=int((time.monotonic() - conn.started) * 1000), sni=conn.sni,
            until=conn.until,
        )  # fmt: skip
        future = asyncio.get_running_loop().run_in_executor(None, self._audit, record)
        future.add_done_callback(_log_audit_failure)


class LocalListener(_LocalListener[ConnectSession]):
    """A ConnectSession on a loop of this process (`egress.loop.LocalListener`)."""


def _log_audit_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("egress: an allowlist audit record could not be written")
