"""`[hosts.NAME]` in config.toml: a second Podman host reached over SSH.

Only the parsing lives here (pure); runtime/ssh.py opens the connection. A host's
address and user are for the controller: reports name a host by its NAME only.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

# The controller's own Podman: a reserved host name, never a [hosts.NAME] table.
LOCAL = "local"


def known_host(name: str, configured: Collection[str]) -> bool:
    """Whether `name` names a writer host: this machine's, or a configured [hosts.NAME]."""
    return name in (LOCAL, *configured)


_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)
_SOCKET = re.compile(r"^/[A-Za-z0-9_./-]{1,200}$")
# ssh expands `%` tokens and `${VAR}` in IdentityFile and UserKnownHostsFile, and reads
# quotes and backslashes in an `-o` value as its own syntax: a path holding one names
# another file than the one writerpool checked.
_SSH_SYNTAX = frozenset("%$\\\"'")


@dataclass(frozen=True)
class SshTarget:
    """Where a host's Podman API socket is: `ssh://USER@ADDRESS:PORT/SOCKET`."""

    user: str
    address: str
    port: int
    socket: str

    def url(self) -> str:
        """Podman's form, with the port always written (Podman 4.3.1 needs it)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"ssh://{self.user}@{host}:{self.port}{self.socket}"


def parse_ssh_url(value: str) -> SshTarget:
    """The target of a Podman `ssh://USER@HOST[:PORT]/PATH` URL; ValueError names the part."""
    parts = urlsplit(value)
    if parts.scheme != "ssh":
        raise ValueError("url must start with ssh://")
    if parts.query or parts.fragment or parts.password is not None:
        raise ValueError("url takes no password, query or fragment")
    user, host = parts.username or "", (parts.hostname or "").lower()
    if not _USER.fullmatch(user):
        raise ValueError("url needs a user name: ssh://USER@HOST:PORT/PATH")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOSTNAME.fullmatch(host):
            raise ValueError("url's host is not a host name or IP address") from None
    try:
        port = 22 if parts.port is None else parts.port
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise ValueError("url's port must be 1-65535")
    path = parts.path
    if not _SOCKET.fullmatch(path) or ".." in PurePosixPath(path).parts:
        raise ValueError("url's path must be the absolute path of Podman's API socket")
    return SshTarget(user, host, port, path)


def _absolute(value: Path) -> Path:
    if not value.is_absolute():
        raise ValueError("must be an absolute path")
    # ssh reads UserKnownHostsFile as a space-separated list: a space would split it.
    if any(c.isspace() or not c.isprintable() for c in str(value)):
        raise ValueError("must be a path without spaces or control characters")
    if _SSH_SYNTAX.intersection(str(value)):
        raise ValueError("must be a path without % $ \\ or quotes (ssh would expand them)")
    return value


class HostConfig(BaseModel):
    """One `[hosts.NAME]` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    # The private key the controller authenticates with.
    identity: Annotated[Path, AfterValidator(_absolute)]
    # The host's pinned key(s), in known_hosts format; a changed key is refused.
    known_hosts: Annotated[Path, AfterValidator(_absolute)]

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parse_ssh_url(value)
        return value

    @property
    def target(self) -> SshTarget:
        return parse_ssh_url(self.url)
