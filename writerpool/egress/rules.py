"""The provider proxy's pure rules: which headers and parameters pass, what is logged,
which certificates are trusted. No I/O but reading CA files."""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Mapping
from urllib.parse import unquote_plus

from multidict import CIMultiDict, CIMultiDictProxy

from writerpool.proc import CA_VARIABLES

log = logging.getLogger(__name__)

# Headers that carry a credential: whatever the agent sends in them is dropped.
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"}
)
# Hop-by-hop headers (RFC 9110 7.6.1) and the ones aiohttp sets itself.
HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "host", "content-length", "expect"}
)  # fmt: skip
DOWN_DROPPED = frozenset({"set-cookie", "set-cookie2"})
# A relative path the routes may see: plain segments, none of them "." or "..".
SAFE_PATH = re.compile(r"^(?:/(?!\.\.?(?:/|$))[A-Za-z0-9._~:-]+)+$")
AUDIT_PATH = re.compile(r"^/[A-Za-z0-9._~:/-]{0,200}$")
METHOD = re.compile(r"^[A-Z]{1,16}$")


def sanitize_path(raw: str) -> str:
    """A request path as the audit log may show it: plain characters only, no query."""
    path = raw.partition("?")[0]
    return path if AUDIT_PATH.fullmatch(path) else "<refused>"


def ssl_context(environ: Mapping[str, str]) -> ssl.SSLContext:
    """The host's trust store plus the CA variables of this process's environment."""
    context = ssl.create_default_context()
    for var in CA_VARIABLES:
        value = environ.get(var)
        if not value:
            continue
        try:
            if var == "SSL_CERT_DIR":
                context.load_verify_locations(capath=value)
            else:
                context.load_verify_locations(cafile=value)
        except (OSError, ssl.SSLError):
            log.warning("egress: %s names no usable certificates; ignored", var)
    return context


def _named_by_connection(headers: CIMultiDictProxy[str]) -> set[str]:
    """Header names the Connection header marks as hop-by-hop."""
    values = headers.getall("connection", [])
    return {part.strip().lower() for value in values for part in value.split(",")}


def _headers_without(incoming: CIMultiDictProxy[str], dropped: frozenset[str]) -> CIMultiDict[str]:
    """The headers not in `dropped`, nor named by the Connection header."""
    named_by_connection = _named_by_connection(incoming)
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in incoming.items():
        low = name.lower()
        if low not in dropped and low not in named_by_connection:
            out.add(name, value)
    return out


def upstream_headers(
    incoming: CIMultiDictProxy[str], auth_header: str, auth_value: str
) -> CIMultiDict[str]:
    """The client's headers without credentials or hop-by-hop ones, plus the real key."""
    out = _headers_without(incoming, CREDENTIAL_HEADERS | HOP_HEADERS)
    out[auth_header] = auth_value
    return out


def downstream_headers(incoming: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    return _headers_without(incoming, HOP_HEADERS | DOWN_DROPPED)


def strip_key_param(query: str) -> str:
    """The raw query string without any `key=` parameter (Google's key-in-URL form)."""
    kept = [
        part for part in query.split("&")
        if part and unquote_plus(part.partition("=")[0]).strip().lower() != "key"
    ]  # fmt: skip
    return "&".join(kept)
