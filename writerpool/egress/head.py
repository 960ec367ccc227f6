"""The one parser of the request heads the egress path reads by hand (the allowlist
proxy's CONNECT and plain HTTP requests). Pure: bytes in, a `Request` or `BadRequest` out.

It is h11's HTTP/1.1 grammar, made strict where h11 is lenient (RFC 9112 lets a server
refuse a bare LF line end and obsolete line folding; this does), plus the proxy's own rules
for what it relays as one bounded request. What passes is sent on in a form the proxy
writes itself (`connect_model.origin_head`), so no parser upstream reads a byte of the head
that this one did not judge. The provider proxy's heads are aiohttp's to parse (behind
`gate`, which only bounds them); the in-writer forwarder relays bytes and reads none.
"""

from __future__ import annotations

import re

import h11

from writerpool.config.allow_entry import normalize_host, parse_address
from writerpool.egress.connect_model import Request, split_authority, split_target

# A head ends at its first blank line as the most lenient reader sees it (h11 and many
# origins also end a line at a bare LF): the proxy judges all that such a reader would
# take for this request's head, and refuses it unless every line ends in CRLF.
HEAD_END = re.compile(rb"\n\r?\n")
LINE = re.compile(rb"[\t\x20-\x7e]*")  # a head line: visible ASCII, SP and HTAB only
METHOD = re.compile(rb"[A-Z]{1,16}")
NAME = re.compile(rb"[a-z0-9-]{1,64}")  # a header name, lower-cased
MAX_TARGET = 2048


class BadRequest(ValueError):
    """A head the proxy refuses (`bad_request`); the message says what is wrong with it."""


def head_end(data: bytes, start: int = 0) -> int | None:
    """Where the head at the start of `data` ends (just past its blank line), or None
    while there is none; `start` is how far an earlier call already looked."""
    found = HEAD_END.search(data, max(0, start - 2))
    return found.end() if found else None


def parse_request(data: bytes) -> tuple[Request, bytes]:
    """The request whose head starts `data`, and the bytes after the head, which belong to
    it (its body's start, or a tunnel's first bytes). Raises BadRequest for a head that is
    malformed, ambiguous or framed so that the proxy cannot relay it as one request, and
    for bytes past a plain request's declared body: a second request on the connection."""
    end = head_end(data)
    if end is None:
        raise BadRequest("the head has no blank line")
    head, rest = data[:end], data[end:]
    lines = _strict_lines(head)
    event = _h11_request(head)
    request = _request(event, lines)
    if request.scheme == "http" and len(rest) > request.body:
        raise BadRequest("bytes past the declared body: a second request")
    return request, rest


def _strict_lines(head: bytes) -> list[bytes]:
    """The head's lines (without the blank one), each ended by CRLF and holding only
    visible ASCII, SP and HTAB, none folded onto the line before."""
    lines = head.split(b"\r\n")
    for line in lines:
        if b"\r" in line or b"\n" in line:
            raise BadRequest("a bare CR or LF in the head")
        if not LINE.fullmatch(line):
            raise BadRequest("a control or non-ASCII character in the head")
    lines = lines[:-2]  # the head ends in CRLF CRLF: the blank line and what follows it
    if any(line[:1] in (b" ", b"\t") for line in lines[1:]):
        raise BadRequest("obsolete line folding")
    return lines


def _h11_request(head: bytes) -> h11.Request:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=max(len(head), 1))
    connection.receive_data(head)
    try:
        event = connection.next_event()
    except h11.RemoteProtocolError as exc:
        raise BadRequest(f"not an HTTP/1.1 request head ({exc})") from exc
    if not isinstance(event, h11.Request):
        raise BadRequest("no request in the head")
    return event


def _request(event: h11.Request, lines: list[bytes]) -> Request:
    if not METHOD.fullmatch(event.method) or len(event.target) > MAX_TARGET:
        raise BadRequest("a method or target the proxy does not take")
    if event.http_version not in (b"1.0", b"1.1"):
        raise BadRequest("not HTTP/1.0 or HTTP/1.1")
    method = event.method.decode("ascii")
    where = split_target(method, event.target.decode("ascii"))
    if where is None:
        raise BadRequest("the target is neither host:port (CONNECT) nor http://host/...")
    host, port, scheme, path = where
    headers = tuple((n.decode("ascii"), v.decode("ascii")) for n, v in event.headers.raw_items())
    request = Request(method, host, port, scheme, path, headers, _body(method, _fields(lines)))
    _check_host(request, [v.decode("ascii") for n, v in event.headers if n == b"host"])
    return request


def _fields(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    """(lower-case name, value) of each header line as sent (h11 merges repeated equal
    Content-Length headers into one; the proxy refuses any repeat). Names are letters,
    digits and '-': some servers read `Transfer_Encoding` as `Transfer-Encoding`."""
    fields = [(name.lower(), value.strip()) for name, _, value in
              (line.partition(b":") for line in lines[1:])]  # fmt: skip
    if not all(NAME.fullmatch(name) for name, _ in fields):
        raise BadRequest("a header name other than letters, digits and '-'")
    return fields


def _body(method: str, fields: list[tuple[bytes, bytes]]) -> int:
    """The declared body length."""
    if any(name == b"transfer-encoding" for name, _ in fields):
        raise BadRequest("Transfer-Encoding: only a body of declared length is relayed")
    lengths = [value for name, value in fields if name == b"content-length"]
    if len(lengths) > 1:
        raise BadRequest("more than one Content-Length")
    if not lengths:
        return 0
    if not lengths[0].isdigit():
        raise BadRequest("a Content-Length that is not one number")
    if method == "CONNECT" and int(lengths[0]):
        raise BadRequest("a CONNECT with a body")
    return int(lengths[0])


def _check_host(request: Request, hosts: list[str]) -> None:
    """A Host header (h11 allows at most one, and none only in HTTP/1.0) must name the
    target's host and port; a CONNECT's Host may leave the port out."""
    if not hosts:
        return
    default = request.port if request.method == "CONNECT" else 80
    given = split_authority(hosts[0], default)
    if given is None or _host_key(given[0]) != _host_key(request.host) or given[1] != request.port:
        raise BadRequest("the Host header names another host than the target")


def _host_key(host: str) -> str:
    name = normalize_host(host) or host.lower()
    address = parse_address(name)
    return name if address is None else str(address)
