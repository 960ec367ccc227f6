"""The allowlist proxy's request heads (egress.head, pure): what it takes,
what it refuses as bad_request, and that what it sends upstream is read by a lenient
HTTP/1.1 parser as exactly the one request the proxy checked."""

from __future__ import annotations

import os

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from writerpool.egress.connect_model import origin_head, split_target
from writerpool.egress.head import BadRequest, head_end, parse_request

FUZZ = settings(
    max_examples=int(os.environ.get("WRITERPOOL_FUZZ_EXAMPLES", "300")),
    deadline=None,
    database=None,
)
GET = b"GET http://listed.test/simple/ HTTP/1.1\r\nHost: listed.test\r\n"
POST = b"POST http://listed.test/upload HTTP/1.1\r\nHost: listed.test\r\n"
CONNECT = b"CONNECT listed.test:443 HTTP/1.1\r\nHost: listed.test:443\r\n"


def test_request_heads_parse_and_plain_requests_go_upstream_in_origin_form() -> None:
    connect, early = parse_request(
        b"CONNECT mirror.example.test:8443 HTTP/1.1\r\nHost: mirror.example.test:8443\r\n\r\n"
    )
    assert (connect.host, connect.port, connect.scheme, connect.body, early) == (
        "mirror.example.test", 8443, "https", 0, b"")  # fmt: skip
    for head in (b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n",
                 b"CONNECT [2001:db8::1]:443 HTTP/1.0\r\n\r\n"):  # fmt: skip
        v6, _ = parse_request(head)
        assert (v6.host, v6.destination) == ("2001:db8::1", "[2001:db8::1]:443")
    plain, early = parse_request(
        b"GET http://plain.example.test/simple/?x=1 HTTP/1.1\r\nHost: Plain.Example.test.:80\r\n"
        b"Proxy-Authorization: Basic eA==\r\nAccept: */*\r\n\r\n"
    )
    assert (plain.port, plain.path, plain.body, early) == (80, "/simple/?x=1", 0, b"")
    sent = origin_head(plain).decode()
    # The Host upstream is the proxy's own spelling of what it checked.
    assert sent.startswith("GET /simple/?x=1 HTTP/1.1\r\nHost: plain.example.test\r\n")
    assert "Proxy-Authorization" not in sent and "Plain.Example" not in sent
    assert sent.endswith("Accept: */*\r\nConnection: close\r\n\r\n")
    for bad in (b"GET /relative HTTP/1.1\r\nHost: a.test\r\n\r\n",
                b"CONNECT host:x HTTP/1.1\r\nHost: host:x\r\n\r\n",
                b"CONNECT a.test:443 HTTP/2\r\nHost: a.test:443\r\n\r\n",
                b"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\nbad\r\n\r\n",
                "CONNECT ü.test:443 HTTP/1.1\r\nHost: ü.test:443\r\n\r\n".encode()):  # fmt: skip
        with pytest.raises(BadRequest):
            parse_request(bad)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        pytest.param(
            GET[:-2] + b"\r\nX-A: a\n\nGET /smuggled HTTP/1.1\nHost: unlisted.example\r\n\r\n",
            "bare CR or LF",
            id="bare-LF-in-a-header-value",
        ),
        pytest.param(
            GET + b"X-A: a\nHost: unlisted.example\r\n\r\n",
            "bare CR or LF",
            id="bare-LF-ending-a-line",
        ),
        pytest.param(
            GET + b"X-A: a\rGET /smuggled HTTP/1.1\r\n\r\n", "bare CR or LF", id="bare-CR"
        ),
        pytest.param(
            b"GET http://listed.test/ HTTP/1.1\n\n", "bare CR or LF", id="bare-LF-only-head"
        ),
        pytest.param(
            GET + b"X-A: a\r\n Host: unlisted.example\r\n\r\n", "line folding", id="obs-fold-space"
        ),
        pytest.param(GET + b"X-A: a\r\n\tb\r\n\r\n", "line folding", id="obs-fold-tab"),
        pytest.param(
            POST + b"Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
            "more than one Content-Length",
            id="duplicate-equal-content-length",
        ),
        pytest.param(
            POST + b"Content-Length: 4\r\nContent-Length: 40\r\n\r\nabcd",
            "Content-Length",
            id="conflicting-content-length",
        ),
        pytest.param(
            POST + b"Content-Length: 4, 4\r\n\r\nabcd", "not one number", id="content-length-list"
        ),
        pytest.param(
            POST + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "Transfer-Encoding",
            id="content-length-with-transfer-encoding",
        ),
        pytest.param(
            POST + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding", id="chunked"
        ),
        pytest.param(
            POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n",
            "Transfer-Encoding",
            id="transfer-encoding-list",
        ),
        pytest.param(
            GET + b"\r\nGET http://unlisted.example/ HTTP/1.1\r\nHost: unlisted.example\r\n\r\n",
            "second request",
            id="pipelined-second-request",
        ),
        pytest.param(
            POST + b"Content-Length: 4\r\n\r\nabcdGET /smuggled HTTP/1.1\r\n\r\n",
            "second request",
            id="pipelined-past-the-body",
        ),
        pytest.param(
            b"GET http://listed.test/ HTTP/1.1\r\nHost: unlisted.example\r\n\r\n",
            "Host header names another host",
            id="host-mismatch",
        ),
        pytest.param(
            b"GET http://listed.test/ HTTP/1.1\r\nHost: listed.test:8080\r\n\r\n",
            "Host header names another host",
            id="host-port-mismatch",
        ),
        pytest.param(
            b"CONNECT listed.test:443 HTTP/1.1\r\nHost: unlisted.example\r\n\r\n",
            "Host header names another host",
            id="connect-host-mismatch",
        ),
        pytest.param(
            b"GET http://listed.test/ HTTP/1.1\r\nHost: listed.test:" + b"0" * 5000 + b"80\r\n\r\n",
            "Host header names another host",
            id="host-port-of-5002-digits",
        ),
        pytest.param(
            b"CONNECT listed.test:" + b"0" * 5000 + b"443 HTTP/1.1\r\nHost: listed.test\r\n\r\n",
            "method or target",
            id="connect-port-of-5003-digits",
        ),
        pytest.param(GET + b"Host: listed.test\r\n\r\n", "multiple Host", id="two-hosts"),
        pytest.param(
            b"GET http://listed.test/ HTTP/1.1\r\n\r\n",
            "Missing mandatory Host",
            id="no-host-in-http-1.1",
        ),
        pytest.param(
            CONNECT + b"Content-Length: 5\r\n\r\nhello",
            "CONNECT with a body",
            id="connect-with-a-body",
        ),
        pytest.param(
            GET + b"Content-Length : 0\r\n\r\n", "illegal header line", id="space-before-colon"
        ),
        pytest.param(
            POST + b"Transfer_Encoding: chunked\r\n\r\n0\r\n\r\n",
            "header name",
            id="underscore-in-a-name",
        ),
        pytest.param(GET + b"X-A: a\x00b\r\n\r\n", "control", id="nul-in-a-value"),
        pytest.param(GET + b"X-A: a\x0bb\r\n\r\n", "control", id="vertical-tab-in-a-value"),
        pytest.param(GET + "X-A: ü\r\n\r\n".encode(), "non-ASCII", id="non-ascii-value"),
        pytest.param(b"\r\n" + GET + b"\r\n", "no request line", id="leading-blank-line"),
    ],
)
def test_ambiguous_or_smuggling_heads_are_refused_as_bad_requests(data: bytes, why: str) -> None:
    with pytest.raises(BadRequest, match=why):
        parse_request(data)


def test_what_follows_a_head_is_the_body_or_the_tunnel_never_a_second_request() -> None:
    request, early = parse_request(POST + b"Content-Length: 4\r\n\r\nab")
    assert (request.body, early) == (4, b"ab")  # the rest of the body is still to come
    request, early = parse_request(POST + b"Content-Length: 4\r\n\r\nabcd")
    assert (request.body, early) == (4, b"abcd")
    # A tunnel's first bytes (a client that does not wait for the 200) go to the listed
    # host inside the tunnel, whatever they are.
    tunnel, early = parse_request(CONNECT + b"\r\n\x16\x03\x01GET / HTTP/1.1\r\n\r\n")
    assert (tunnel.scheme, early) == ("https", b"\x16\x03\x01GET / HTTP/1.1\r\n\r\n")
    # A CONNECT's Host may leave out the port; an HTTP/1.0 request may have no Host.
    bare, _ = parse_request(b"CONNECT listed.test:8443 HTTP/1.1\r\nHost: listed.test\r\n\r\n")
    old, _ = parse_request(b"GET http://listed.test:8080/ HTTP/1.0\r\nAccept: */*\r\n\r\n")
    assert (bare.port, old.port, old.host) == (8443, 8080, "listed.test")


def test_a_head_ends_where_the_most_lenient_reader_ends_it() -> None:
    """A bare LF ends a line for h11 and many origins: the head the proxy judges is all
    that such a reader takes for this request's head, so the smuggled half is in it."""
    smuggled = GET + b"X-A: a\n\nGET /smuggled HTTP/1.1\r\n\r\n"
    assert head_end(smuggled) == len(GET) + len(b"X-A: a\n\n")
    assert head_end(GET) is None and head_end(GET + b"\r\n") == len(GET) + 2
    assert head_end(GET + b"\r") is None


@FUZZ
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=200))
def test_a_head_end_found_in_pieces_is_the_one_found_at_once(data: bytes, cut: int) -> None:
    first = data[: min(cut, len(data))]
    found = head_end(first)
    assert (found if found is not None else head_end(data, len(first))) == head_end(data)


# Heads of a client that sends a Host and well-formed fields, with up to two hostile
# pieces put anywhere after the request line, and bytes after the head.
LINES = st.sampled_from(
    [b"GET http://listed.test/ HTTP/1.1\r\n", b"POST http://listed.test/x HTTP/1.1\r\n",
     b"GET http://listed.test/ HTTP/1.0\r\n", b"CONNECT listed.test:443 HTTP/1.1\r\n"]
)  # fmt: skip
HOSTS = st.sampled_from(
    [b"Host: listed.test\r\n", b"Host: LISTED.test.\r\n", b"Host: listed.test:80\r\n",
     b"Host: listed.test:443\r\n", b""]
)  # fmt: skip
FIELDS = st.sampled_from(
    [b"X-A: a", b"X-A:\ta b ", b"Accept: */*", b"Content-Length: 3", b"Content-Length: 03",
     b"Content-Length: 0"]
)  # fmt: skip
HOSTILE = st.sampled_from(
    [b"\n", b"\r", b"\r\n", b" folded\r\n", b"\tHost: other.test\r\n", b"Host: other.test\r\n",
     b"Transfer-Encoding: chunked\r\n", b"\r\nGET http://other.test/ HTTP/1.1\r\n",
     b"\n\nGET /smuggled HTTP/1.1\r\n", b"X-B: a\x00b\r\n", b"Content-Length: 3\r\n"]
)  # fmt: skip
AFTER = st.sampled_from([b"", b"abc", b"GET /smuggled HTTP/1.1\r\nHost: other.test\r\n\r\n"])


@st.composite
def hostile_requests(draw: st.DrawFn) -> bytes:
    line = draw(LINES)
    head = line + draw(HOSTS) + b"".join(f + b"\r\n" for f in draw(st.lists(FIELDS, max_size=3)))
    for piece in draw(st.lists(HOSTILE, max_size=2)):
        at = draw(st.integers(len(line), len(head)))
        head = head[:at] + piece + head[at:]
    return head + b"\r\n" + draw(AFTER)


@FUZZ
@given(hostile_requests())
def test_what_the_proxy_sends_upstream_is_one_request_to_the_host_it_checked(
    data: bytes,
) -> None:
    """Whatever head is accepted, a lenient HTTP/1.1 parser (h11 takes bare LF line ends
    and folded lines) reads what goes upstream as that one request, to the host the
    allowlist judged, and nothing after it."""
    try:
        request, early = parse_request(data)
    except BadRequest:
        return
    assert request.host == "listed.test"
    if request.scheme == "https":
        return  # a tunnel: its bytes are the listed host's business
    origin = h11.Connection(h11.SERVER)
    origin.receive_data(origin_head(request) + early)
    events = []
    while (event := origin.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
        events.append(event)
    assert isinstance(events[0], h11.Request)
    assert dict(events[0].headers)[b"host"] == b"listed.test"
    assert not any(isinstance(e, h11.Request) for e in events[1:])
    if len(early) == request.body:
        assert isinstance(events[-1], h11.EndOfMessage)
        assert origin.trailing_data == (b"", False)


def test_split_target_names_host_port_scheme_and_path() -> None:
    assert split_target("CONNECT", "a.test:8443") == ("a.test", 8443, "https", "")
    assert split_target("GET", "http://a.test") == ("a.test", 80, "http", "/")
    assert split_target("GET", "http://[2001:db8::1]:81/x") == ("2001:db8::1", 81, "http", "/x")
    assert split_target("GET", "https://a.test/") is None
    assert split_target("GET", "http://user@a.test/") is None
    for port in ("0" * 4300 + "1", "\u0663", "\u00b2", "080000", ""):  # never a ValueError
        assert split_target("CONNECT", f"a.test:{port}") is None, port
        assert split_target("GET", f"http://[::1]:{port}/") is None, port
