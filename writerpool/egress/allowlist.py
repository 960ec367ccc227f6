"""A workspace's egress allowlist: requests decided against its entries, sets expanded,
addresses judged. Pure. The entries' grammar is config/allow_entry.py (the configuration
checks its sets with it).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from writerpool.config.allow_entry import (
    SET_NAME_RE,
    Address,
    Entry,
    Network,
    Scheme,
    normalize_host,
    parse_address,
    parse_entry,
)
from writerpool.errors import WriterpoolError

MAX_ENTRIES = 64  # after sets are expanded

# Decisions: the audit line's `reason`, the agent's message and `egress check` say these.
ALLOWED = "allowed"
NOT_LISTED = "not_listed"
PORT_NOT_LISTED = "port_not_listed"
SCHEME_NOT_LISTED = "scheme_not_listed"
NAME_INVALID = "name_invalid"


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
# SIIT's IPv4-translated form (RFC 2765), in the last 32 bits too; 6to4 (2002::/16)
# carries its IPv4 address in bits 16-48 to wherever a host routes it.
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
# Deprecated site-local addresses (RFC 3879): private, though Python's tables of some
# versions call them global.
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")


def _as_ipv4(address: Address) -> Address:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, translated, compatible,
    6to4), else itself."""
    if not isinstance(address, ipaddress.IPv6Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    embeds = address in _NAT64 or address in _TRANSLATED
    if embeds or (address in _V4_COMPATIBLE and int(address) > 1):
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
    if address.is_private or address in _SITE_LOCAL:
        return "address_private"
    if not address.is_global:
        return "address_reserved"
    return None
