"""The server name a TLS client asks for, read from its ClientHello. Pure: bytes in, a
`ClientHello` (or "not yet": None) or `HelloRefused` out.

The allowlist proxy checks it against the name of the CONNECT before it sends a byte
upstream, so a tunnel to a listed name cannot carry a handshake for another site that
shares its address. Nothing is decrypted or changed: the proxy forwards the bytes it
read. What is read: TLS handshake records (RFC 8446 5.1), reassembled when the
ClientHello spans several, and the ClientHello's extensions (4.1.2); `server_name`
(RFC 6066 3) gives the name, `encrypted_client_hello` (its outer hello's name is the
one sent in the clear, the one checked here) is noted. Anything else is refused: a
first byte that is not a handshake record, another handshake message first, lengths
that do not add up, a repeated extension, two host names.
"""

from __future__ import annotations

from dataclasses import dataclass

from writerpool.config.allow_entry import normalize_host, parse_address

# Reasons (the allowlist proxy's audit and refusal words).
NOT_TLS = "not_tls"
HELLO_TOO_LARGE = "hello_too_large"
SNI_MISSING = "sni_missing"
SNI_MISMATCH = "sni_mismatch"

HANDSHAKE = 0x16
CLIENT_HELLO = 0x01
SERVER_NAME = 0x0000
ENCRYPTED_CLIENT_HELLO = 0xFE0D
HOST_NAME = 0x00
MAX_RECORD = 1 << 14  # a record's plaintext (RFC 8446 5.1)
MAX_HELLO = 1 << 14  # a ClientHello's body; real ones are well under 4 KiB
MAX_READ = 2 * MAX_HELLO  # bytes read while looking for it, record headers included
_HEADER = 5


class HelloRefused(ValueError):
    """Not a ClientHello the proxy lets through; `reason` says why."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason


@dataclass(frozen=True)
class ClientHello:
    server_name: str | None  # the host_name as matched (lower case, no trailing dot)
    sent_name: bool  # whether a server_name extension named a host at all
    ech: bool  # an encrypted_client_hello extension was present (its outer hello read)


def read_hello(data: bytes) -> ClientHello | None:
    """The ClientHello at the start of `data`, or None while more bytes are needed.
    Raises HelloRefused as soon as what is there cannot begin one (or is too large)."""
    message = _handshake_message(data)
    if message is None:
        return None
    return _client_hello(message)


def name_refusal(hello: ClientHello, name: str) -> str | None:
    """Why `hello` may not go to `name` (None: it may). `name` is the CONNECT's name as
    checked; the server name must be the same, compared as the allowlist compares names
    (case and a trailing dot aside). Only a CONNECT to an address may come without one:
    RFC 6066 has no server name for an address, and TLS clients send none."""
    wanted = normalize_host(name)
    if not hello.sent_name:
        return None if wanted is not None and parse_address(wanted) is not None else SNI_MISSING
    return None if hello.server_name is not None and hello.server_name == wanted else SNI_MISMATCH


def _handshake_message(data: bytes) -> bytes | None:
    """The first handshake message, joined from as many records as carry it."""
    body = bytearray()
    offset = 0
    while True:  # bounded: every turn consumes a non-empty record of data
        header = data[offset : offset + _HEADER]
        _check_header(header)
        if len(header) < _HEADER:
            return None
        length = int.from_bytes(header[3:5], "big")
        if length == 0 or length > MAX_RECORD:
            raise HelloRefused(NOT_TLS, "a handshake record of impossible length")
        fragment = data[offset + _HEADER : offset + _HEADER + length]
        body += fragment
        _check_message_start(body)
        if len(fragment) < length:
            return None
        offset += _HEADER + length
        if len(body) >= 4:
            size = int.from_bytes(body[1:4], "big")
            if len(body) >= 4 + size:
                return bytes(body[4 : 4 + size])
        if offset >= MAX_READ:
            raise HelloRefused(HELLO_TOO_LARGE, "the ClientHello spans too many records")


def _check_header(header: bytes) -> None:
    if header[:1] and header[0] != HANDSHAKE:
        raise HelloRefused(NOT_TLS, "the first bytes are not a TLS handshake record")
    if header[1:2] and header[1] != 3:
        raise HelloRefused(NOT_TLS, "not a TLS record version")


def _check_message_start(body: bytearray) -> None:
    if body[:1] and body[0] != CLIENT_HELLO:
        raise HelloRefused(NOT_TLS, "the first handshake message is not a ClientHello")
    if len(body) >= 4 and int.from_bytes(body[1:4], "big") > MAX_HELLO:
        raise HelloRefused(HELLO_TOO_LARGE, "the ClientHello is larger than the proxy reads")


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise HelloRefused(NOT_TLS, "a ClientHello field runs past its end")
        self.at += size
        return self.data[self.at - size : self.at]

    def number(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def vector(self, size: int) -> bytes:
        return self.take(self.number(size))

    @property
    def left(self) -> int:
        return len(self.data) - self.at


def _client_hello(message: bytes) -> ClientHello:
    cursor = _Cursor(message)
    if cursor.take(1) != b"\x03":
        raise HelloRefused(NOT_TLS, "not a TLS ClientHello version")
    cursor.take(1 + 32)  # legacy_version's minor, random
    if len(cursor.vector(1)) > 32:
        raise HelloRefused(NOT_TLS, "a session id longer than 32 bytes")
    suites = cursor.vector(2)
    if not suites or len(suites) % 2:
        raise HelloRefused(NOT_TLS, "no cipher suites, or an odd list of them")
    if not cursor.vector(1):
        raise HelloRefused(NOT_TLS, "no compression method")
    extensions = _extensions(cursor.vector(2)) if cursor.left else {}
    if cursor.left:
        raise HelloRefused(NOT_TLS, "bytes after the ClientHello's extensions")
    named = extensions.get(SERVER_NAME)
    host = None if named is None else _host_name(named)
    return ClientHello(
        server_name=None if host is None else normalize_host(host),
        sent_name=host is not None,
        ech=ENCRYPTED_CLIENT_HELLO in extensions,
    )


def _extensions(data: bytes) -> dict[int, bytes]:
    cursor, found = _Cursor(data), dict[int, bytes]()
    while cursor.left:  # bounded: each turn consumes at least four bytes
        kind = cursor.number(2)
        if kind in found:
            raise HelloRefused(NOT_TLS, "an extension appears twice")
        found[kind] = cursor.vector(2)
    return found


def _host_name(data: bytes) -> str | None:
    """The one host_name of a server_name extension (None if it names none)."""
    outer = _Cursor(data)
    names = _Cursor(outer.vector(2))
    if outer.left:
        raise HelloRefused(NOT_TLS, "bytes after the server name list")
    hosts: list[bytes] = []
    while names.left:  # bounded: each turn consumes at least three bytes
        kind, value = names.number(1), names.vector(2)
        if kind == HOST_NAME:
            hosts.append(value)
    if len(hosts) > 1:
        raise HelloRefused(NOT_TLS, "more than one host name")
    if not hosts:
        return None
    return hosts[0].decode("ascii", "replace")
