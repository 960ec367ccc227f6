"""A writer's `.git` as a throwaway container on its host saw it (clonetool's gitsnap.py):
the answers to the paths the clone check asks about, replayed as a reader (kind,
entries, read) that gitops/verify.py judges. The controller never reads a clone itself.

The answers are hostile: validated into a frozen model, each listing and file bounded
(the model refuses more), and a path the probe did not ask about is a bug, not a pass.
"""

from __future__ import annotations

import base64
import binascii
from enum import Enum
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field


class Kind(Enum):
    MISSING = "missing"
    FILE = "file"
    DIR = "directory"
    SYMLINK = "symbolic link"
    OTHER = "special file"


class UnsafePathError(Exception):
    """A path below `.git` was a link, a special file, too large, or unreadable, as the
    container saw it (its words)."""


MAX_ENTRIES = 10_000  # clonetool's gitsnap.py lists at most this many names
MAX_NAME = 4096


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KindAnswer(_Model):
    value: Kind | None = None
    unsafe: str | None = Field(default=None, max_length=500)


class EntriesAnswer(_Model):
    value: tuple[tuple[str, Kind], ...] | None = Field(default=None, max_length=MAX_ENTRIES)
    unsafe: str | None = Field(default=None, max_length=500)


class ReadAnswer(_Model):
    value: str | None = Field(default=None, max_length=2 * 1024 * 1024)  # base64
    unsafe: str | None = Field(default=None, max_length=500)


class GitDirSnapshot(_Model):
    top: str | None = Field(default=None, max_length=500)
    kinds: dict[str, KindAnswer] = Field(default={}, max_length=100)
    entries: dict[str, EntriesAnswer] = Field(default={}, max_length=100)
    reads: dict[str, ReadAnswer] = Field(default={}, max_length=100)


_M = TypeVar("_M", KindAnswer, EntriesAnswer, ReadAnswer)


def _asked(answers: dict[str, _M], rel: str) -> _M:
    answer = answers.get(rel)
    if answer is None:
        raise KeyError(f"the probe did not ask about {rel}")
    if answer.unsafe is not None:
        raise UnsafePathError(answer.unsafe)
    return answer


class SnapshotGitDir:
    """The check's reads (kind, entries, read) answered from a snapshot."""

    def __init__(self, snapshot: GitDirSnapshot) -> None:
        if snapshot.top is not None:
            raise UnsafePathError(snapshot.top)
        self._snapshot = snapshot

    def kind(self, rel: str) -> Kind:
        return _asked(self._snapshot.kinds, rel).value or Kind.MISSING

    def entries(self, rel: str) -> list[tuple[str, Kind]]:
        found = _asked(self._snapshot.entries, rel).value or ()
        return [(name[:MAX_NAME], kind) for name, kind in found]

    def read(self, rel: str, limit: int) -> bytes | None:
        encoded = _asked(self._snapshot.reads, rel).value
        if encoded is None:
            return None
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise UnsafePathError(f"{rel} came back garbled") from exc
        if len(data) > limit:
            raise UnsafePathError(f"{rel} is too large")
        return data
