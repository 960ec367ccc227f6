"""Per-client bearer tokens of the pool service: shown once, stored as SHA-256 digests
(0600, in the service's directory). The service's Guard checks requests against them;
`service token`, `register --http` and a relay of `serve` make and revoke them; the
service closes the sessions of a client whose token is gone.

A token is 32 random bytes, so an unsalted digest is as strong as the token itself.
A token writerpool registered a client with is *held* instead of shown: kept in
`service/held/NAME` (0600, in a 0700 directory), whence only writerpool's header helper
(clients/header.py) reads it, for the client, at each connection.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.proc import is_recorded_process, started
from writerpool.untrusted import DocumentRefused, loads_json

NAME = re.compile(r"[a-z][a-z0-9-]{0,31}\Z")
# Clients one user keeps at most: bounds the file and the per-request comparison loop.
MAX_CLIENTS = 64
TOKEN_PREFIX = "wps_"  # noqa: S105 - a marker, not a secret
CORRUPT = "the service token file is corrupt"
# The names only relays take (`serve-<pid>-<start time>`): a relay that no longer runs has
# no use for its token, and its sessions are then nobody's (the service closes them).
RELAY_PREFIX = "serve-"


def tokens_file(paths: Paths) -> Path:
    return paths.service_dir / "tokens.json"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load(paths: Paths) -> dict[str, str]:
    """Client name -> token digest (empty when no token was ever created)."""
    try:
        raw = tokens_file(paths).read_bytes()
    except FileNotFoundError:
        return {}
    try:
        document = loads_json(raw.decode())
    except (ValueError, DocumentRefused, UnicodeDecodeError) as exc:
        raise WriterpoolError("service_tokens_invalid", CORRUPT) from exc
    clients = document.get("clients") if isinstance(document, dict) else None
    if not isinstance(clients, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in clients.items()
    ):
        raise WriterpoolError("service_tokens_invalid", CORRUPT)
    return dict(clients)


def _store(paths: Paths, clients: dict[str, str]) -> None:
    ensure_private_dir(paths.service_dir)
    data = json.dumps({"schema_version": 1, "clients": clients}, sort_keys=True).encode()
    write_atomic(tokens_file(paths), data, mode=0o600)


def _checked_name(name: str) -> str:
    if not NAME.match(name):
        raise WriterpoolError(
            "usage_invalid", "a client name is 1-32 of a-z, 0-9 and '-', starting with a letter"
        )
    return name


@contextlib.contextmanager
def _editing(paths: Paths, name: str) -> Iterator[dict[str, str]]:
    """The clients under the file's lock, stored again when the block ends without error."""
    _checked_name(name)
    ensure_private_dir(paths.service_dir)
    with FileLock(str(tokens_file(paths)) + ".lock"):
        clients = load(paths)
        yield clients
        _store(paths, clients)


def create(paths: Paths, name: str) -> str:
    """A new token for client `name` (replacing its old one); returned once, never stored."""
    with _editing(paths, name) as clients:
        if name not in clients and len(clients) >= MAX_CLIENTS:
            raise WriterpoolError("usage_invalid", f"at most {MAX_CLIENTS} clients; revoke one")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        clients[name] = _digest(token)
    return token


def revoke(paths: Paths, name: str) -> None:
    with _editing(paths, name) as clients:
        if clients.pop(name, None) is None:
            raise WriterpoolError("service_client_unknown", "no client of that name has a token")
        held_file(paths.service_dir, name).unlink(missing_ok=True)


def held_file(directory: Path, name: str) -> Path:
    """Where a held token lies, under the service directory `directory`."""
    return directory / "held" / _checked_name(name)


def hold(paths: Paths, name: str) -> None:
    """Make sure client `name` has a token that writerpool holds (never shown): a held
    one is kept, anything else replaced by a new one."""
    held = held_file(paths.service_dir, name)
    with contextlib.suppress(FileNotFoundError, ValueError):
        if client_of(load(paths), held.read_text().strip()) == name:
            return
    token = create(paths, name)
    ensure_private_dir(held.parent)
    write_atomic(held, token.encode(), mode=0o600)


def client_of(clients: dict[str, str], token: str) -> str | None:
    """The client a presented token belongs to; every digest is compared in constant time."""
    presented = _digest(token)
    found = None
    for name, digest in clients.items():  # bounded by MAX_CLIENTS
        if hmac.compare_digest(presented, digest):
            found = name
    return found


def relay_name(pid: int) -> str:
    """The client name of the relay `pid`: its start time too, since once it ended its
    pid comes round to another process, which must not keep the relay's token alive."""
    start = started(pid)
    # Unknown (no /proc to read): named by its pid alone, which keeps it alive while it runs.
    return f"{RELAY_PREFIX}{pid}" if start is None else f"{RELAY_PREFIX}{pid}-{start}"


def relay_gone(name: str) -> bool:
    """Whether `name` is a relay's and its process no longer runs (`serve-<pid>`, an
    older writerpool's name, is taken by its pid alone)."""
    if not name.startswith(RELAY_PREFIX):
        return False
    pid, _, when = name.removeprefix(RELAY_PREFIX).partition("-")
    try:
        record = {"pid": int(pid), "started": int(when)} if when else {"pid": int(pid)}
    except ValueError:
        return True
    return not is_recorded_process(record)


def prune_gone_relays(paths: Paths) -> None:
    """Revoke the tokens of relays that no longer run (killed before they could)."""
    for name in load(paths):  # bounded by MAX_CLIENTS
        if relay_gone(name):
            with contextlib.suppress(WriterpoolError):  # another pruner was first
                revoke(paths, name)
