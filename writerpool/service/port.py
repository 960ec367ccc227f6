"""Who holds a loopback TCP port. The kernel's socket tables (/proc/net/tcp, tcp6) name
the uid of every listening socket, whoever owns it; a port another account listens on
must never receive a client's bearer token (docs/service.md, "Who can reach it")."""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
LISTEN = "0A"
# Local addresses whose listener takes 127.0.0.1:PORT: loopback itself, and the wildcard
# of IPv4 and of IPv6 (dual stack), as the kernel's tables print them.
_COVERING = frozenset({
    "0100007F", "00000000",
    "00000000000000000000000000000000",
    "0000000000000000FFFF00000100007F", "0000000000000000FFFF000000000000",
})  # fmt: skip


@dataclass(frozen=True)
class Holder:
    """A socket listening where the service would: its owner's uid (and name, if known)."""

    uid: int

    @property
    def user(self) -> str | None:
        try:
            return pwd.getpwuid(self.uid).pw_name
        except KeyError:
            return None

    def describe(self) -> str:
        name = self.user
        return f"uid {self.uid} ({name})" if name else f"uid {self.uid}"


def parse_listeners(text: str, port: int) -> list[Holder]:
    """The listeners on `port` that take 127.0.0.1, from one table's text."""
    found = []
    for line in text.splitlines()[1:]:  # bounded by the table the kernel printed
        fields = line.split()
        if len(fields) < 8 or fields[3] != LISTEN:
            continue
        address, _, port_hex = fields[1].partition(":")
        try:
            if int(port_hex, 16) != port or address.upper() not in _COVERING:
                continue
            found.append(Holder(int(fields[7])))
        except ValueError:
            continue
    return found


def holders(port: int, tables: Iterable[Path] = TABLES) -> list[Holder]:
    """Every listener on 127.0.0.1:`port` that this network namespace shows."""
    found: list[Holder] = []
    for table in tables:
        with contextlib.suppress(OSError):  # no IPv6 on this host, say
            found += parse_listeners(table.read_text(), port)
    return found


def bindable(port: int) -> bool:
    """Whether the service could bind 127.0.0.1:`port` now (as it binds: SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def describe(port: int) -> tuple[str, list[int]]:
    """Who holds 127.0.0.1:`port`, in words, and their uids (empty: none this namespace
    shows, e.g. a socket only just closed, or one in another network namespace)."""
    found = holders(port)
    uids = sorted({holder.uid for holder in found})
    if not uids:
        return "a socket this account cannot see", uids
    named = [Holder(uid).describe() for uid in uids]
    if uids == [os.getuid()]:
        return f"a program of this account ({named[0]})", uids
    return "another account: " + ", ".join(named), uids
