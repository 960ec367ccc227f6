"""Who holds a loopback TCP port. The kernel's socket tables (/proc/net/tcp, tcp6) name
the uid of every listening socket, whoever owns it; a port another account listens on
must never receive a client's bearer token (docs/service.md, "Who can reach it")."""

from __future__ import annotations

import os
import pwd
import socket
from dataclasses import dataclass
from pathlib import Path

from writerpool.clients.header import TABLES, listener_uids


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


def holders(port: int, tables: tuple[Path, ...] = TABLES) -> list[Holder]:
    """Every listener on 127.0.0.1:`port` that this network namespace shows."""
    return [Holder(uid) for uid in listener_uids(port, tables)]


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
