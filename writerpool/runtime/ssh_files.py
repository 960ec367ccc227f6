"""A host's identity and known_hosts files, trusted only when no other account can change
them: a pin that another account may rewrite pins nothing.

ssh checks a private key's mode itself (and ignores a key others can read, which then
looks like a refused key); it never checks the known_hosts file it is given. Both are
checked here the way ssh checks its own configuration (`safe_path`): the file and every
directory above it (the link's and its target's) owned by this account or root and
writable by no one else; a directory with the sticky bit (`/tmp`) may be shared, since
others cannot replace what they do not own there.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from writerpool.errors import WriterpoolError

_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH
_SHARED_READ = stat.S_IRWXG | stat.S_IRWXO
# A known_hosts file of a few pinned keys; a larger one is not a pin.
KNOWN_HOSTS_MAX = 256 * 1024


def _refuse(name: str, what: str, why: str) -> WriterpoolError:
    # The path is the controller's: named by its setting, never printed.
    return WriterpoolError("host_config_invalid", f"hosts.{name}.{what} {why}")


def _trusted_owner(info: os.stat_result) -> bool:
    return info.st_uid in (0, os.geteuid())


def _check_directories(name: str, what: str, path: Path) -> None:
    for directory in path.parents:  # bounded by the path's depth
        info = directory.stat()
        sticky = bool(info.st_mode & stat.S_ISVTX)
        if not _trusted_owner(info) or (info.st_mode & _SHARED_WRITE and not sticky):
            raise _refuse(name, what, "lies in a directory another account may change")


def check_key_file(name: str, what: str, path: Path, *, private: bool) -> None:
    """Refuse (`host_config_invalid`) a file that is missing, unreadable, not a regular
    file, or open to changes by another account; a private key also when others may
    read it (ssh would ignore it)."""
    try:
        real = path.resolve(strict=True)
        info = real.stat()
    except (OSError, RuntimeError):
        raise _refuse(name, what, "is missing or unreadable") from None
    if not stat.S_ISREG(info.st_mode) or not os.access(real, os.R_OK):
        raise _refuse(name, what, "is missing or unreadable")
    if not _trusted_owner(info) or info.st_mode & _SHARED_WRITE:
        raise _refuse(name, what, "may be written by another account")
    if private and info.st_mode & _SHARED_READ:
        raise _refuse(name, what, "may be read by another account (make it mode 0600)")
    _check_directories(name, what, path)
    _check_directories(name, what, real)
    if not private:
        _check_pins(name, what, real)


def _check_pins(name: str, what: str, path: Path) -> None:
    # `@cert-authority` trusts any key its CA signed: no longer the exact key pinned.
    with path.open("rb") as known:
        text = known.read(KNOWN_HOSTS_MAX + 1)
    if len(text) > KNOWN_HOSTS_MAX:
        raise _refuse(name, what, f"is larger than {KNOWN_HOSTS_MAX} bytes")
    for line in text.splitlines():  # bounded by KNOWN_HOSTS_MAX
        if line.strip().lower().startswith(b"@cert-authority"):
            raise _refuse(name, what, "trusts a certificate authority (@cert-authority), "
                          "not a pinned key")  # fmt: skip
