"""Where a listed name leads: its addresses as the allowlist proxy finds them, each judged.

One function for the proxy (`egress.connect`, once per connection, after the name was
found listed) and for `writerpool egress check`, so the check answers what the proxy
would: a literal address is itself; a name in `[egress.resolve]` has the addresses
written there (the machine's resolver is never asked for it); any other name is asked of
the host's resolver. Every answer is judged (`allowlist.address_refusal`); the proxy
connects only to one that passed.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from writerpool.config.allow_entry import Address, Network, parse_address
from writerpool.egress.allowlist import address_refusal

# A blocking name lookup: (name, port) -> address texts. The host's resolver by default;
# tests inject one that records what it is asked.
Lookup = Callable[[str, int], Sequence[str]]
Source = Literal["address", "map", "resolver"]


def system_lookup(host: str, port: int) -> list[str]:
    """The host's resolver (getaddrinfo, as any program on the host would ask it)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]).partition("%")[0] for info in infos]


@dataclass(frozen=True)
class Judged:
    address: Address
    refusal: str | None  # None: the proxy may connect to it


@dataclass(frozen=True)
class Resolution:
    """A name's answers, judged, and where they came from; `failure` when there were none."""

    source: Source
    judged: tuple[Judged, ...]
    failure: str | None = None

    @property
    def usable(self) -> list[Address]:
        return [j.address for j in self.judged if j.refusal is None]

    @property
    def refused(self) -> Judged | None:
        """The first refused answer when no answer may be used (what the proxy reports)."""
        if self.usable:
            return None
        return next((j for j in self.judged if j.refusal is not None), None)


def static_answers(host: str, mapped: Mapping[str, tuple[str, ...]]) -> Source | None:
    """Where `host`'s answers come from without a lookup, or None when one is needed."""
    if parse_address(host) is not None:
        return "address"
    return "map" if host in mapped else None


def resolve(
    host: str,
    port: int,
    mapped: Mapping[str, tuple[str, ...]],
    ranges: Iterable[Network],
    lookup: Lookup = system_lookup,
) -> Resolution:
    """`host`'s addresses (a name already found listed, or an address), each judged.
    Calls `lookup` at most once, and only for a name outside `mapped`."""
    source = static_answers(host, mapped) or "resolver"
    if source == "address":
        texts: Sequence[str] = (host,)
    elif source == "map":
        texts = mapped[host]
    else:
        try:
            texts = lookup(host, port)
        except (OSError, UnicodeError) as exc:
            return Resolution(source, (), _why(exc))
    found = dict.fromkeys(a for a in map(parse_address, texts) if a is not None)
    listed = tuple(ranges)
    judged = tuple(Judged(a, address_refusal(a, listed)) for a in found)
    return Resolution(source, judged, None if judged else "no address")


def _why(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror) and exc.strerror:
        return exc.strerror
    return type(exc).__name__
