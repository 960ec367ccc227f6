"""What the allowlist proxy decides and reports: records and parsed requests, no I/O.
Light and shared (the server reads its records); the head parser is `egress.head`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from writerpool.config.allow_entry import Scheme

# Reasons beyond the allowlist's own (allowlist.py) and the address judgements.
OK = "allowed"
BAD_REQUEST = "bad_request"
HEADER_TOO_LARGE = "header_too_large"
HEADER_TIMEOUT = "header_timeout"
CAP_CONNECTIONS = "cap_connections"
CAP_CONCURRENT = "cap_concurrent"
RESOLVE_FAILED = "resolve_failed"
UPSTREAM_FAILED = "upstream_failed"
HELLO_TIMEOUT = "hello_timeout"  # no whole ClientHello within the header deadline
HELLO_INCOMPLETE = "hello_incomplete"  # the agent ended before its ClientHello did
# (`egress.clienthello` names the rest of a tunnel's refusals: not_tls, sni_missing, ...;
# `egress.handoff` names handoff_refused, for what came with the forwarder's offer)
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
# What a TLS client is told when its ClientHello is refused: a fatal alert record (RFC
# 8446 6.2), sent in the clear as an alert before the handshake is, whose description
# stands for the reason: unrecognized_name (RFC 6066 3) for a server name other than the
# CONNECT's, missing_extension for none; access_denied for the rest. The acceptance
# harness reads them back (payload/harness/tls.py ALERT_REASONS).
HELLO_ALERTS = {"sni_mismatch": 112, "sni_missing": 109}
ACCESS_DENIED = 49
DENIED_KEPT = 32  # distinct refused destinations a session keeps for its turns

ABSOLUTE = re.compile(r"^http://([^/?#@\s]{1,300})(/[^\s#]*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class ConnectLimits:
    """An allowlist proxy's caps per session (config `[egress]`)."""

    concurrent: int
    total: int
    header_bytes: int
    header_seconds: float
    idle_seconds: float


@dataclass(frozen=True)
class Request:
    """A request's head as the proxy needs it: where to, which scheme, what to send on."""

    method: str
    host: str
    port: int
    scheme: Scheme
    path: str  # origin-form target of a plain HTTP request; "" for CONNECT
    headers: tuple[tuple[str, str], ...]
    body: int = 0  # the declared Content-Length; 0 for CONNECT and a request without one

    @property
    def destination(self) -> str:
        return f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]:{self.port}"


@dataclass(frozen=True)
class ConnectRecord:
    """One connection through a session's allowlist proxy. Never a body or a header."""

    session: str
    writer: str | None
    method: str
    destination: str  # host:port as asked (sanitized), or "<refused>"
    allowed: bool
    reason: str
    entry: str | None
    address: str | None  # the address connected to (or refused)
    bytes_up: int
    bytes_down: int
    duration_ms: int
    sni: str | None = None  # the server name of the tunnel's ClientHello, as read
    until: float | None = None  # allowed by a session-scoped entry that ends then (epoch s)


def split_authority(authority: str, default: int) -> tuple[str, int] | None:
    """`host[:port]` or `[v6][:port]` into (host, port); None when malformed."""
    host, port = authority, default
    if authority.startswith("["):
        inner, _, rest = authority[1:].partition("]")
        host = inner
        if rest:
            if not rest.startswith(":"):
                return None
            port = _port(rest[1:])
    elif ":" in authority:
        host, _, text = authority.rpartition(":")
        port = _port(text)
    if not host or not 1 <= port <= 65535:
        return None
    return host, port


def _port(text: str) -> int:
    """A port's number, or 0 when it is not 1-5 ASCII digits (str.isdigit also takes
    other scripts' digits and superscripts, and int() refuses 4,300 digits and more)."""
    return int(text) if 1 <= len(text) <= 5 and text.isascii() and text.isdigit() else 0


def split_target(method: str, target: str) -> tuple[str, int, Scheme, str] | None:
    """(host, port, scheme, origin-form path) of a request line's target: `host:port` for
    CONNECT, absolute-form `http://` for the rest; None for anything else."""
    if method == "CONNECT":
        parts = split_authority(target, 443)
        return None if parts is None else (parts[0], parts[1], "https", "")
    absolute = ABSOLUTE.fullmatch(target)
    if absolute is None:
        return None
    parts = split_authority(absolute.group(1), 80)
    if parts is None:
        return None
    return parts[0], parts[1], "http", absolute.group(2) or "/"


# Headers a plain HTTP request does not carry upstream: the proxy's own and hop-by-hop.
_DROPPED = frozenset(
    {"proxy-authorization", "proxy-connection", "connection", "keep-alive", "te",
     "trailer", "upgrade", "host", "transfer-encoding"}
)  # fmt: skip


def origin_head(request: Request) -> bytes:
    """The request head sent upstream for plain HTTP: origin-form, one request only."""
    host = request.destination if request.port != 80 else request.host
    lines = [f"{request.method} {request.path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{n}: {v}" for n, v in request.headers if n.lower() not in _DROPPED]
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def hello_alert(reason: str) -> bytes:
    """The fatal alert record a ClientHello refused for `reason` is answered with."""
    return b"\x15\x03\x03\x00\x02\x02" + bytes([HELLO_ALERTS.get(reason, ACCESS_DENIED)])


def refusal_head(status: int, destination: str, reason: str) -> bytes:
    """The answer to a refused request: the status line itself names the host (clients
    often show only that), the body says it again in words."""
    words = {
        403: f"writerpool: {destination} is not allowed ({reason})",
        400: f"writerpool: a malformed proxy request ({reason})",
        429: f"writerpool: the session's allowlist proxy cap is reached ({reason})",
        502: f"writerpool: {destination} could not be reached ({reason})",
    }[status]
    body = (words + "; `writerpool egress check` names what is allowed\n").encode("ascii")
    head = (
        f"HTTP/1.1 {status} {words}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    return head + body
