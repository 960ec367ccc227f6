"""The ownership record: which registrations writerpool added, where, with exactly what,
over either transport (a `serve` command line, or the pool service's URL).

One file, `<state dir>/clients/registrations.json` (0600, atomic replace), guarded by a
lock file beside it for the whole of a register command. An entry is written as
`pending` before the client is asked to add, and becomes `applied` once the client
reports the registration back: an interrupted apply is recognised on the next run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, ValidationError

from writerpool import __version__
from writerpool.atomic import ensure_private_dir, write_atomic
from writerpool.clients.model import Registration, Target
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError

LOCK_TIMEOUT = 10.0


class OwnedRegistration(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str
    project: str | None = None
    name: str
    # A stdio registration's command line, or (url set) the pool service's URL and the
    # header helper the client runs for its token.
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    url: str | None = None
    helper: str | None = None
    # Client settings writerpool wrote into the entry (Codex's config.toml keys).
    settings: dict[str, Any] = {}
    status: Literal["pending", "applied"]
    writerpool_version: str

    def registration(self) -> Registration:
        return Registration(self.command, self.args, dict(self.env), dict(self.settings),
                            self.url, self.helper)  # fmt: skip

    def key(self) -> tuple[str, str | None]:
        return (self.target, self.project)


class OwnershipRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    registrations: tuple[OwnedRegistration, ...] = ()

    def find(self, target: Target) -> OwnedRegistration | None:
        key = _key(target)
        return next((e for e in self.registrations if e.key() == key), None)

    def with_entry(self, entry: OwnedRegistration) -> OwnershipRecord:
        kept = tuple(e for e in self.registrations if e.key() != entry.key())
        return OwnershipRecord(registrations=(*kept, entry))

    def without(self, target: Target) -> OwnershipRecord:
        key = _key(target)
        return OwnershipRecord(registrations=tuple(e for e in self.registrations if e.key() != key))


def _key(target: Target) -> tuple[str, str | None]:
    return (target.name, str(target.project) if target.project else None)


def entry_for(
    target: Target, name: str, registration: Registration, status: Literal["pending", "applied"]
) -> OwnedRegistration:
    return OwnedRegistration(
        target=target.name,
        project=str(target.project) if target.project else None,
        name=name,
        command=registration.command,
        args=registration.args,
        env=dict(registration.env),
        url=registration.url,
        helper=registration.helper,
        settings=dict(registration.settings),
        status=status,
        writerpool_version=__version__,
    )


def clients_dir(paths: Paths) -> Path:
    return paths.state_dir / "clients"


def record_file(paths: Paths) -> Path:
    return clients_dir(paths) / "registrations.json"


@contextmanager
def locked(paths: Paths) -> Iterator[None]:
    """Hold the record's lock; a second register command waits, then gives up."""
    ensure_private_dir(clients_dir(paths))
    lock = FileLock(str(record_file(paths)) + ".lock", timeout=LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout as exc:
        raise WriterpoolError(
            "ownership_unavailable", "another register command holds the ownership record"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def load_record(paths: Paths) -> OwnershipRecord:
    path = record_file(paths)
    if not path.exists() and not path.is_symlink():
        return OwnershipRecord()
    if path.is_symlink() or not path.is_file():
        raise WriterpoolError("ownership_unavailable", "the ownership record is not a plain file")
    try:
        return OwnershipRecord.model_validate(json.loads(path.read_bytes()))
    except (ValueError, ValidationError) as exc:
        raise WriterpoolError(
            "ownership_unavailable", "the ownership record is unreadable; nothing was changed"
        ) from exc


def store_record(paths: Paths, record: OwnershipRecord) -> None:
    data = json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    write_atomic(record_file(paths), data.encode())
