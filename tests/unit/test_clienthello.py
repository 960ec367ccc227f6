"""The ClientHello reader the allowlist proxy checks a tunnel's server name with, fed real
first flights: Python's TLS client (made in memory) and `openssl s_client` (caught on a
loopback listener), whole, split across reads and records, made too large, cut short,
altered, and bytes that are not TLS at all."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.egress import client_hello
from writerpool.egress.clienthello import (
    HELLO_TOO_LARGE,
    MAX_HELLO,
    NOT_TLS,
    SNI_MISMATCH,
    SNI_MISSING,
    ClientHello,
    HelloRefused,
    name_refusal,
    read_hello,
)

ECH = 0xFE0D
PADDING = 21
FUZZED = client_hello("fuzz.test")  # made once: each is a TLS context's work


def no_name_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    return context


def split(raw: bytes) -> tuple[bytes, list[tuple[int, bytes]]]:
    """A one-record ClientHello as (its body up to the extensions, its extensions)."""
    body = raw[9:]
    at = 2 + 32
    at += 1 + body[at]
    at += 2 + int.from_bytes(body[at : at + 2], "big")
    at += 1 + body[at]
    block, extensions = body[at + 2 :], []
    while block:
        kind, size = int.from_bytes(block[:2], "big"), int.from_bytes(block[2:4], "big")
        extensions.append((kind, block[4 : 4 + size]))
        block = block[4 + size :]
    return body[:at], extensions


def build(prefix: bytes, extensions: list[tuple[int, bytes]], record: int = 1 << 14) -> bytes:
    """The ClientHello of `prefix` and `extensions`, in records of at most `record` bytes."""
    block = b"".join(k.to_bytes(2, "big") + len(d).to_bytes(2, "big") + d for k, d in extensions)
    body = prefix + len(block).to_bytes(2, "big") + block
    message = b"\x01" + len(body).to_bytes(3, "big") + body
    chunks = [message[i : i + record] for i in range(0, len(message), record)]
    return b"".join(b"\x16\x03\x01" + len(c).to_bytes(2, "big") + c for c in chunks)


def server_name(*names: bytes) -> bytes:
    entries = b"".join(b"\x00" + len(n).to_bytes(2, "big") + n for n in names)
    return len(entries).to_bytes(2, "big") + entries


def with_extension(raw: bytes, kind: int, data: bytes) -> bytes:
    prefix, extensions = split(raw)
    return build(prefix, [*extensions, (kind, data)])


def openssl_hello(*args: str) -> bytes:
    """What `openssl s_client` sends first to a loopback listener that never answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = subprocess.Popen(
            ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(30)
                data = b""
                while read_hello(data) is None:
                    chunk = conn.recv(65536)
                    assert chunk, "openssl ended before its ClientHello"
                    data += chunk
        finally:
            client.kill()
            client.wait(timeout=30)
    return data


def test_a_real_clienthello_names_its_server_as_the_allowlist_compares_names() -> None:
    hello = read_hello(client_hello("Registry.Test."))
    assert hello == ClientHello(server_name="registry.test", sent_name=True, ech=False)
    assert name_refusal(hello, "registry.test") is None
    assert name_refusal(hello, "REGISTRY.test.") is None
    assert name_refusal(hello, "other.test") == SNI_MISMATCH
    assert name_refusal(hello, "sub.registry.test") == SNI_MISMATCH
    assert name_refusal(hello, "127.0.0.1") == SNI_MISMATCH


@pytest.mark.parametrize(
    "sent", [b"a.example.test\t", b" a.example.test\x0b", b"a.example.test\n",
             b"[a.example.test]", b"a.example.test..", b"a.example.test\x00"]
)  # fmt: skip
def test_a_server_name_padded_or_bracketed_is_not_the_connect_name(sent: bytes) -> None:
    """The name is judged as the server will get it: a front end that routes by it
    would send a padded name to its default backend, not to the listed one."""
    prefix, extensions = split(client_hello("a.example.test"))
    named = [(k, server_name(sent) if k == 0 else d) for k, d in extensions]
    hello = read_hello(build(prefix, named))
    assert hello is not None and hello.sent_name
    assert name_refusal(hello, "a.example.test") == SNI_MISMATCH


def test_a_clienthello_without_a_server_name_passes_only_to_an_address() -> None:
    for hello in (read_hello(client_hello(None, no_name_context())),
                  read_hello(client_hello("127.0.0.1"))):  # fmt: skip
        assert hello is not None and (hello.server_name, hello.sent_name) == (None, False)
        assert name_refusal(hello, "registry.test") == SNI_MISSING
        assert name_refusal(hello, "127.0.0.1") is None
        assert name_refusal(hello, "[::1]") is None


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_openssl_s_client_hellos_are_read_the_same_way() -> None:
    named = read_hello(openssl_hello("-servername", "Mirror.Corp.Test"))
    assert named is not None and named.server_name == "mirror.corp.test"
    assert name_refusal(named, "mirror.corp.test") is None
    assert name_refusal(named, "cdn.corp.test") == SNI_MISMATCH
    unnamed = read_hello(openssl_hello("-noservername"))
    assert unnamed is not None and not unnamed.sent_name
    assert name_refusal(unnamed, "mirror.corp.test") == SNI_MISSING


def test_a_clienthello_split_across_reads_and_records_is_read_whole() -> None:
    raw = client_hello("split.test")
    for cut in range(len(raw)):
        assert read_hello(raw[:cut]) is None, cut  # more is needed, nothing refused
    prefix, extensions = split(raw)
    for size in (1, 40, 333):
        framed = build(prefix, extensions, record=size)
        assert framed.count(b"\x16\x03\x01") >= len(raw[5:]) // size
        for cut in range(0, len(framed), 7):
            assert read_hello(framed[:cut]) is None
        assert read_hello(framed) == read_hello(raw)
    # What follows the ClientHello (more records) is not its business.
    after = read_hello(raw + b"\x14\x03\x03\x00\x01\x01" + b"\x17\x03\x03\x00\x05hello")
    assert after is not None and after.server_name == "split.test"


def test_oversized_clienthellos_are_refused_before_they_are_read_whole() -> None:
    declared = b"\x16\x03\x01\x00\x04\x01" + (MAX_HELLO + 1).to_bytes(3, "big")
    with pytest.raises(HelloRefused) as large:
        read_hello(declared)  # four bytes of the message say enough
    assert large.value.reason == HELLO_TOO_LARGE
    raw = client_hello("large.test")
    padded = with_extension(raw, PADDING, bytes(MAX_HELLO))
    with pytest.raises(HelloRefused) as padded_refusal:
        read_hello(padded[:20])
    assert padded_refusal.value.reason == HELLO_TOO_LARGE
    prefix, extensions = split(raw)
    crumbs = build(prefix, [*extensions, (PADDING, bytes(6000))], record=1)
    with pytest.raises(HelloRefused) as crumbled:
        read_hello(crumbs)  # one byte per record: more than the proxy reads
    assert crumbled.value.reason == HELLO_TOO_LARGE
    with pytest.raises(HelloRefused) as record:
        read_hello(b"\x16\x03\x01\x40\x01")  # a record larger than TLS allows
    assert record.value.reason == NOT_TLS


Parts = tuple[bytes, list[tuple[int, bytes]]]


def twice(prefix: bytes, extensions: list[tuple[int, bytes]]) -> Parts:
    return prefix, [*extensions, extensions[0]]


def two_names(prefix: bytes, extensions: list[tuple[int, bytes]]) -> Parts:
    return prefix, [(0, server_name(b"a.test", b"b.test")), *extensions[1:]]


def long_session(prefix: bytes, extensions: list[tuple[int, bytes]]) -> Parts:
    return prefix[:34] + b"\x21" + bytes(33) + prefix[35 + prefix[34] :], extensions


def after_names(prefix: bytes, extensions: list[tuple[int, bytes]]) -> Parts:
    return prefix, [(0, server_name(b"a.test") + b"x"), *extensions[1:]]


@pytest.mark.parametrize("alter", [twice, two_names, long_session, after_names])
def test_altered_clienthellos_are_refused_as_not_tls(
    alter: Callable[[bytes, list[tuple[int, bytes]]], Parts],
) -> None:
    prefix, extensions = split(client_hello("altered.test"))
    assert extensions[0][0] == 0  # Python's client sends server_name first
    new_prefix, new_extensions = alter(prefix, extensions)
    with pytest.raises(HelloRefused) as refused:
        read_hello(build(new_prefix, new_extensions))
    assert refused.value.reason == NOT_TLS


def test_a_field_running_past_its_message_is_not_tls() -> None:
    raw = bytearray(client_hello("cut.test"))
    raw[3:5] = (int.from_bytes(raw[3:5], "big") - 10).to_bytes(2, "big")  # the record
    raw[6:9] = (int.from_bytes(raw[6:9], "big") - 10).to_bytes(3, "big")  # the message
    with pytest.raises(HelloRefused) as refused:
        read_hello(bytes(raw[:-10]))
    assert refused.value.reason == NOT_TLS


@pytest.mark.parametrize(
    "first",
    [b"GET / HTTP/1.1\r\n", b"CONNECT a.test:443 HTTP/1.1\r\n", b"SSH-2.0-x\r\n",
     b"\x80\x2e\x01\x03\x01", b"\x15\x03\x03\x00\x02\x02\x28", b"\x16\x02\x00\x00\x01",
     b"\x16\x03\x03\x00\x30\x02\x00\x00\x2c", b"\x16\x03\x01\x00\x00"],
)  # fmt: skip
def test_what_is_not_a_clienthello_is_refused_from_its_first_bytes(first: bytes) -> None:
    with pytest.raises(HelloRefused) as refused:
        read_hello(first)
    assert refused.value.reason == NOT_TLS


def test_an_ech_outer_name_is_the_server_name_checked() -> None:
    outer = with_extension(client_hello("public.test"), ECH, b"\x00" + bytes(40))
    hello = read_hello(outer)
    assert hello == ClientHello(server_name="public.test", sent_name=True, ech=True)
    assert name_refusal(hello, "listed.test") == SNI_MISMATCH
    assert name_refusal(hello, "public.test") is None
    bare = with_extension(client_hello(None, no_name_context()), ECH, b"\x00" + bytes(40))
    bare_hello = read_hello(bare)
    assert bare_hello is not None and bare_hello.ech
    assert name_refusal(bare_hello, "listed.test") == SNI_MISSING


@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=700), st.integers(min_value=0, max_value=600), st.binary(max_size=4))
def test_any_bytes_are_read_refused_or_waited_on_never_misread(
    noise: bytes, at: int, patch: bytes
) -> None:
    raw = bytearray(FUZZED)
    raw[at : at + len(patch)] = patch
    for data in (noise, bytes(raw)):
        try:
            hello = read_hello(data)
        except HelloRefused as refused:
            assert refused.reason in (NOT_TLS, HELLO_TOO_LARGE)
            continue
        if hello is not None and hello.server_name is not None:
            assert hello.server_name == hello.server_name.lower().rstrip(".")
