"""Session-scoped allowlist entries: what `writerpool egress allow` adds to a live
allowlist proxy, each until its time.

One file per writer (`WriterRecord.egress_grants`, outside the directory mounted into
the writer): the server writes it empty when a session's allowlist proxy opens and
removes it when the session ends; `egress allow` adds entries to it under its lock,
replaced atomically. The proxy reads it again whenever it changed, at each decision the
configured allowlist refuses, and keeps only entries of its own session whose time has
not come (`until`, seconds since the epoch, against a clock the tests inject). Nothing
restarts: the next connection sees the entry, and the one after its time does not.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from writerpool.atomic import write_atomic
from writerpool.config.allow_entry import Entry, parse_entry
from writerpool.errors import WriterpoolError

__all__ = ["Grant", "GrantFile", "GrantWatch", "add", "close_session", "open_session", "read"]

log = logging.getLogger(__name__)

MAX_GRANTS = 32
MAX_FILE_BYTES = 64 * 1024
LOCK_TIMEOUT = 10.0
Clock = Callable[[], float]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Grant(_Model):
    """One session-scoped entry: its canonical text, until when, and who added it."""

    entry: str = Field(max_length=300)
    until: float
    by: str = Field(max_length=64)

    @field_validator("entry")
    @classmethod
    def _canonical(cls, value: str) -> str:
        try:
            parsed = parse_entry(value)
        except WriterpoolError as exc:
            raise ValueError(exc.message) from exc
        if parsed.text != value:
            raise ValueError("an entry is stored in its canonical spelling")
        return value

    def live(self, now: float) -> bool:
        return now < self.until


class GrantFile(_Model):
    schema_version: int = Field(1, alias="schemaVersion")
    session: str = Field(max_length=128)
    socket: str = Field(max_length=4096)  # the session's allowlist proxy listens there
    grants: tuple[Grant, ...] = Field((), max_length=MAX_GRANTS)

    def live(self, now: float) -> tuple[Grant, ...]:
        return tuple(g for g in self.grants if g.live(now))

    def encoded(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode() + b"\n"


def open_session(path: Path, session: str, socket: Path) -> None:
    """A session's allowlist proxy opens: no entry yet (whatever an earlier session was
    given ends with it)."""
    with _locked(path):
        write_atomic(path, GrantFile(session=session, socket=str(socket)).encoded())


def close_session(path: Path, session: str) -> None:
    """The session ends: its entries go with it (another session's file stays)."""
    with _locked(path):
        found = _read_or_none(path)
        if found is None or found.session == session:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def read(path: Path) -> GrantFile | None:
    """The file, or None when there is none; raises egress_grants_invalid when unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriterpoolError("egress_grants_invalid", f"session entries: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    try:
        if len(data) > MAX_FILE_BYTES:
            raise ValueError("too large")
        return GrantFile.model_validate_json(data)
    except (ValueError, ValidationError) as exc:
        raise WriterpoolError(
            "egress_grants_invalid", "the session entries file is invalid"
        ) from exc


def _read_or_none(path: Path) -> GrantFile | None:
    try:
        return read(path)
    except WriterpoolError:
        return None


def add(path: Path, session: str, grant: Grant, now: float) -> GrantFile:
    """Add `grant` for `session` (replacing an entry of the same text; dropping the ones
    whose time has come). Raises egress_allow_no_session when the file belongs to no or
    another session, allow_too_many past MAX_GRANTS; then nothing changes."""
    with _locked(path):
        found = read(path)
        if found is None or found.session != session:
            raise WriterpoolError("egress_allow_no_session", "the writer's session has ended")
        kept = tuple(g for g in found.live(now) if g.entry != grant.entry)
        if len(kept) >= MAX_GRANTS:
            raise WriterpoolError(
                "allow_too_many", f"the session holds {MAX_GRANTS} session-scoped entries"
            )
        updated = found.model_copy(update={"grants": (*kept, grant)})
        write_atomic(path, updated.encoded())
        return updated


def _locked(path: Path) -> FileLock:
    return FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT)


@dataclass(frozen=True)
class Live:
    """The entries a proxy may use now, and until when each."""

    entries: tuple[Entry, ...] = ()
    until: dict[str, float] | None = None

    def until_of(self, text: str | None) -> float | None:
        return None if text is None or self.until is None else self.until.get(text)


class GrantWatch:
    """The proxy's view of its session's file: read again only when it changed."""

    def __init__(self, path: Path, session: str, clock: Clock = time.time) -> None:
        self.path = path
        self.session = session
        self._clock = clock
        self._seen: tuple[int, int, int] | None = None
        self._grants: tuple[Grant, ...] = ()

    def live(self) -> Live:
        """The session's entries whose time has not come (none when the file is gone or
        invalid, or another session's)."""
        self._refresh()
        now = self._clock()
        grants = [g for g in self._grants if g.live(now)]
        entries = tuple(parse_entry(g.entry) for g in grants)  # checked as the file was read
        return Live(entries, {g.entry: g.until for g in grants})

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            self._seen, self._grants = None, ()
            return
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        if seen == self._seen:
            return
        self._seen = seen
        try:
            found = read(self.path)
        except WriterpoolError:
            log.warning("egress: the session entries file is invalid; none apply")
            found = None
        self._grants = found.grants if found is not None and found.session == self.session else ()
