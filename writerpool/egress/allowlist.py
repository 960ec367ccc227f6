"""A workspace's egress allowlist: entries parsed and matched, addresses judged. Pure.

Entry forms (one word each, as given to `mode set --allow`):
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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from writerpool.errors import WriterpoolError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Kind = Literal["host", "wildcard", "range"]
Scheme = Literal["https", "http"]

MAX_ENTRIES = 64  # after sets are expanded
MAX_ENTRY_CHARS = 260
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})+$")
SET_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
DERIVED_SETS = ("host-pip", "host-uv", "host-npm")

# Decisions: the audit line's `reason`, the agent's message and `egress check` say these.
ALLOWED = "allowed"
NOT_LISTED = "not_listed"
PORT_NOT_LISTED = "port_not_listed"
SCHEME_NOT_LISTED = "scheme_not_listed"
NAME_INVALID = "name_invalid"


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


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    entry: str | None = None  # the entry that allowed it


@dataclass(frozen=True)
class Allowlist:
    entries: tuple[Entry, ...]

    @property
    def ranges(self) -> tuple[Network, ...]:
        return tuple(e.network for e in self.entries if e.network is not None)

    def decide(self, host: str, port: int, scheme: Scheme = "https") -> Decision:
        """Whether a request for host:port may be attempted (before resolution)."""
        name = normalize_host(host)
        if name is None:
            return Decision(False, NAME_INVALID)
        literal = parse_address(name)
        if literal is not None:
            return self._decide_address(literal, port, scheme)
        named = [e for e in self.entries if e.matches_name(name)]
        if not named:
            return Decision(False, NOT_LISTED)
        same_scheme = [e for e in named if e.scheme == scheme]
        if not same_scheme:
            return Decision(False, SCHEME_NOT_LISTED)
        for entry in same_scheme:
            if entry.port == port:
                return Decision(True, ALLOWED, entry.text)
        return Decision(False, PORT_NOT_LISTED)

    def _decide_address(self, address: Address, port: int, scheme: Scheme) -> Decision:
        for entry in self.entries:
            if entry.network is not None and address in entry.network:
                if scheme != "https":
                    return Decision(False, SCHEME_NOT_LISTED)
                if port != entry.port:
                    return Decision(False, PORT_NOT_LISTED)
                return Decision(True, ALLOWED, entry.text)
        return Decision(False, NOT_LISTED)


def _invalid(text: str, why: str) -> WriterpoolError:
    shown = "".join(c for c in text[:80] if c.isprintable())
    return WriterpoolError("allow_entry_invalid", f"allow entry {shown!r}: {why}")


def normalize_host(host: str) -> str | None:
    """A host as matched: lower case, no trailing dot; None when it is not a plain name
    or address (no user info, no percent signs, no spaces)."""
    name = host.strip().lower().removesuffix(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
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


def expand(
    words: Iterable[str],
    sets: Mapping[str, tuple[str, ...]],
    why_empty: Callable[[str], str] | None = None,
) -> tuple[tuple[Entry, ...], dict[str, tuple[str, ...]]]:
    """Entries of `words` with sets replaced by their hosts, in order and without
    repeats, and which set each entry came from. `sets` holds every known set (those
    of the config and the derived ones). Raises on an unknown set or a bad entry, and
    on an empty set (`why_empty` says why it is empty and what to do)."""
    entries: dict[str, Entry] = {}
    origin: dict[str, tuple[str, ...]] = {}
    for word in words:
        members: tuple[str, ...]
        if SET_NAME_RE.fullmatch(word.strip()):
            name = word.strip()
            if name not in sets:
                known = ", ".join(sorted(sets)) or "none"
                raise WriterpoolError(
                    "allow_set_unknown",
                    f"{name!r} is neither a host name with a dot nor a known set (known: {known})",
                )
            members = sets[name]
            if not members:
                why = f": {why_empty(name)}" if why_empty is not None else ""
                raise WriterpoolError(
                    "allow_set_empty", f"set {name!r} names no host on this machine{why}"
                )
        else:
            name, members = "", (word,)
        for member in members:
            entry = parse_entry(member)
            entries.setdefault(entry.text, entry)
            if name:
                origin[entry.text] = (*origin.get(entry.text, ()), name)
    if len(entries) > MAX_ENTRIES:
        raise WriterpoolError("allow_too_many", f"more than {MAX_ENTRIES} allowlist entries")
    return tuple(entries.values()), origin


def admitting_entry(
    host: str, port: int, scheme: Scheme, reason: str, address: str | None = None
) -> str | None:
    """The entry that, added to the allowlist, would admit what was refused for `reason`
    (`address`: the answer refused); None when no entry would, and for a cloud metadata
    address, which no fix line should suggest."""
    if reason.startswith("address_") and reason != "address_metadata" and address:
        target: str | None = address
    elif reason in (NOT_LISTED, PORT_NOT_LISTED, SCHEME_NOT_LISTED):
        target = normalize_host(host)
    else:
        return None
    if target is None:
        return None
    literal = parse_address(target) is not None
    word = f"[{target}]" if ":" in target else target
    if scheme == "http" and not literal:
        word = f"http://{word}" if port == 80 else f"http://{word}:{port}"
    elif port != 443:
        word = f"{word}:{port}"
    try:
        return parse_entry(word).text
    except WriterpoolError:
        return None


def split_words(value: str) -> tuple[str, ...]:
    """`--allow a,b c` into its words (commas or spaces)."""
    return tuple(w for w in re.split(r"[,\s]+", value) if w)


# Cloud instance metadata endpoints: named apart in the reason, refused like the rest.
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")
# IPv6 addresses that stand for an IPv4 one in their last 32 bits: NAT64's well-known
# prefix (RFC 6052) and the deprecated IPv4-compatible form. A NAT64 gateway would carry
# 64:ff9b::a9fe:a9fe to 169.254.169.254.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: embedding is local


def _as_ipv4(address: Address) -> Address:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, compatible), else itself."""
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or (address in _V4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def address_refusal(address: Address, ranges: Iterable[Network]) -> str | None:
    """Why the proxy will not connect to `address` (None: it may). Only global unicast
    addresses pass, unless an entry names a range holding the address."""
    listed = tuple(ranges)
    if any(address in network for network in listed if network.version == address.version):
        return None
    if address in _NAT64_LOCAL:
        return "address_reserved"
    address = _as_ipv4(address)
    if any(address in network for network in listed if network.version == address.version):
        return None
    if address in METADATA:
        return "address_metadata"
    if address.is_loopback:
        return "address_loopback"
    if address.is_multicast:
        return "address_multicast"
    if address.is_link_local:
        return "address_link_local"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "address_shared"
    if address.is_private:
        return "address_private"
    if not address.is_global:
        return "address_reserved"
    return None
