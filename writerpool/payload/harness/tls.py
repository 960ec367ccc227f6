"""TLS as the allowlist probes speak it: a real ClientHello, made by the image's OpenSSL
in memory (no socket, no certificate checked: nothing is ever completed), and the alert a
proxy answers a refused one with."""

from __future__ import annotations

import contextlib
import ssl

ALERT = 0x15
FATAL = 2
# The alert descriptions (RFC 8446 6.2) the allowlist proxy refuses a ClientHello with,
# by the reason it audits (writerpool/egress/connect_model.py HELLO_ALERTS, the same).
ALERT_REASONS = {112: "sni_mismatch", 109: "sni_missing", 49: "access_denied"}


def client_hello(server_name: str | None) -> bytes:
    """The first flight of a TLS client asking for `server_name` (None: no SNI at all)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with contextlib.suppress(ssl.SSLWantReadError):  # the hello is out; the rest needs a server
        client.do_handshake()
    return outgoing.read()


def alert_reason(data: bytes) -> str | None:
    """The reason a fatal alert record at the start of `data` stands for; None when
    `data` does not start with one."""
    if len(data) < 7 or data[0] != ALERT or data[1] != 3 or data[3:5] != b"\x00\x02":
        return None
    if data[5] != FATAL:
        return None
    return ALERT_REASONS.get(data[6], f"alert_{data[6]}")
