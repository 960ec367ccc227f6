"""The grammar of an allowlist entry (`mode set --allow`, `[egress.sets.NAME]`): parsed,
spelled canonically, refused with allow_entry_invalid. Pure; the configuration checks its
sets with it, and egress/allowlist.py decides requests against the parsed entries.

Entry forms (one word each):
- `host.example.test`, `host.example.test:8443`: that name, port 443 unless given;
- `*.example.test[:port]`: any name under the domain (not the domain itself);
- `http://host[:port]`: plain HTTP to that name, port 80 unless given;
- `10.1.0.0/16`, `192.0.2.7`, `[fd00::/8]`: an address range. A listed name may resolve
  into it although it is private, and a CONNECT to a literal address in it is allowed
  (port 443);
- `NAME`: a set, `[egress.sets.NAME]` in config.toml or one derived from this host's
  package-manager configuration (`host-pip`, `host-uv`, `host-npm`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Literal

from writerpool.errors import WriterpoolError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Kind = Literal["host", "wildcard", "range"]
Scheme = Literal["https", "http"]

MAX_ENTRY_CHARS = 260
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})+$")
SET_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
DERIVED_SETS = ("host-pip", "host-uv", "host-npm")


@dataclass(frozen=True)
class Entry:
    """One parsed allowlist entry; `text` is its canonical spelling."""

    kind: Kind
    text: str
    host: str = ""  # the name, or the domain of a wildcard
    port: int = 443
    scheme: Scheme = "https"
    network: Network | None = None

    def matches_name(self, host: str) -> bool:
        if self.kind == "host":
            return host == self.host
        if self.kind == "wildcard":
            return host.endswith("." + self.host)
        return False


def _invalid(text: str, why: str) -> WriterpoolError:
    shown = "".join(c for c in text[:80] if c.isprintable())
    return WriterpoolError("allow_entry_invalid", f"allow entry {shown!r}: {why}")


def normalize_host(host: str) -> str | None:
    """A host as matched: lower case, one trailing dot dropped, an IPv6 address's
    brackets dropped; None when it is not a plain name or address as given (no user
    info, no percent signs, no spaces or padding, no brackets around a name). What an
    agent sends is judged as it will be sent: a name padded with a tab reaches the
    server padded."""
    name = host.lower().removesuffix(".")
    if name.startswith("[") and name.endswith("]"):
        inner = parse_address(name[1:-1])
        return str(inner) if isinstance(inner, ipaddress.IPv6Address) else None
    if parse_address(name) is not None or HOST_RE.fullmatch(name):
        return name
    return None


def parse_address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _split_port(text: str, default: int) -> tuple[str, int]:
    """`host[:port]`, `[v6]:port` or a bare address into (host, port)."""
    if text.startswith("["):
        inner, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError("text after ']'")
        return inner, _port(rest[1:]) if rest else default
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, _port(port)
    return text, default


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError("the port must be a number from 1 to 65535")
    return int(text)


def parse_entry(text: str) -> Entry:
    """One entry that is not a set name; raises allow_entry_invalid."""
    if not text or len(text) > MAX_ENTRY_CHARS:
        raise _invalid(text, "empty or too long")
    raw = text.strip().lower()
    scheme: Scheme = "https"
    if raw.startswith("http://"):
        scheme, raw = "http", raw.removeprefix("http://").removesuffix("/")
    elif "://" in raw:
        raise _invalid(text, "only http:// may be written (443 is the default)")
    try:
        host, port = _split_port(raw, 80 if scheme == "http" else 443)
    except ValueError as exc:
        raise _invalid(text, str(exc)) from exc
    if "/" in host or parse_address(host) is not None:
        return _range_entry(text, host, port, scheme)
    wildcard = host.startswith("*.")
    name = host.removeprefix("*.")
    if not HOST_RE.fullmatch(name):
        raise _invalid(text, "not a host name with a dot (letters, digits, '-' and '.')")
    kind: Kind = "wildcard" if wildcard else "host"
    spelled = ("*." if wildcard else "") + name
    spelled = f"http://{spelled}" if scheme == "http" else spelled
    default = 80 if scheme == "http" else 443
    canonical = spelled if port == default else f"{spelled}:{port}"
    return Entry(kind=kind, text=canonical, host=name, port=port, scheme=scheme)


def _range_entry(text: str, host: str, port: int, scheme: Scheme) -> Entry:
    if scheme != "https":
        raise _invalid(text, "an address range takes no http://")
    try:
        network = ipaddress.ip_network(host, strict=True)
    except ValueError as exc:
        raise _invalid(text, "not an address or a range with its host bits zero") from exc
    shown = f"[{network}]" if network.version == 6 else str(network)
    canonical = shown if port == 443 else f"{shown}:{port}"
    return Entry(kind="range", text=canonical, port=port, network=network)


def split_words(value: str) -> tuple[str, ...]:
    """`--allow a,b c` into its words (commas or spaces)."""
    return tuple(w for w in re.split(r"[,\s]+", value) if w)
