"""Reading a writer clone's refs from the host, executing nothing.

Loose refs are read through `safefs` (no links followed, no FIFOs opened); packed
refs are parsed with dulwich. Ref values must be object ids or `ref: ` symrefs;
anything else makes the read fail rather than return a guess. Every read stops at the
limits of gitops/limits.py: a clone beyond them is `clone_over_cap`, found before the
rest of it is read.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.refs import read_packed_refs_with_peeled

from writerpool.errors import WriterpoolError
from writerpool.gitops.limits import LIMITS
from writerpool.gitops.safefs import GitDir, Kind, TooLargeError, UnsafePathError

_OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_SYMREF = b"ref: "
_MAX_SYMREF_DEPTH = 5
DETACHED = "detached"


@dataclass(frozen=True)
class CloneRefs:
    """What a clone's refs say: HEAD, branches, tags (short names), and a stash."""

    head: str
    head_commit: str
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    stash: bool = False


class CloneUnreadableError(WriterpoolError):
    def __init__(self, message: str) -> None:
        super().__init__("clone_unreadable", message)


class CloneOverCapError(WriterpoolError):
    def __init__(self, message: str) -> None:
        super().__init__("clone_over_cap", message)


def _name(raw: bytes) -> str:
    # Keep undecodable bytes as surrogates so later name checks can refuse them.
    return raw.decode("utf-8", "surrogateescape")


def _loose_value(gitdir: GitDir, rel: str) -> bytes:
    data = gitdir.read(rel, limit=LIMITS.ref_file_bytes)
    if data is None:
        raise CloneUnreadableError("a ref vanished while it was read")
    value = data.rstrip(b"\r\n")
    if value.startswith(_SYMREF) or _OID.fullmatch(value):
        return value
    raise CloneUnreadableError("a ref holds neither an object id nor a symbolic ref")


def _over(what: str) -> CloneOverCapError:
    return CloneOverCapError(f"beyond what writerpool reads from a clone: {what}")


def _add(refs: dict[str, bytes], raw: bytes, value: bytes) -> None:
    if len(raw) > LIMITS.ref_name_bytes:
        raise _over(f"a ref name of {len(raw)} bytes (at most {LIMITS.ref_name_bytes})")
    refs[_name(raw)] = value
    if len(refs) > LIMITS.refs:
        raise _over(f"more than {LIMITS.refs} refs")


def _all_refs(gitdir: GitDir) -> dict[str, bytes]:
    """Full ref name -> raw value (object id or `ref: target`); loose refs win."""
    refs: dict[str, bytes] = {}
    packed = gitdir.read("packed-refs", limit=LIMITS.packed_refs_bytes)
    if packed is not None:
        lines = io.BytesIO(packed)
        try:
            for oid, ref, _peeled in read_packed_refs_with_peeled(lines):
                _add(refs, ref, bytes(oid))
        except CloneOverCapError:
            raise
        except Exception as exc:  # any parse failure is unreadable
            raise CloneUnreadableError("packed-refs cannot be parsed") from exc
    if gitdir.kind("refs") is not Kind.DIR:
        raise CloneUnreadableError("refs is not a directory")
    for rel in gitdir.walk_files("refs", max_entries=LIMITS.refs):
        _add(refs, rel.encode("utf-8", "surrogateescape"), _loose_value(gitdir, rel))
    return refs


def _resolve(refs: dict[str, bytes], head: bytes) -> str:
    value = head
    for _ in range(_MAX_SYMREF_DEPTH):
        if not value.startswith(_SYMREF):
            return value.decode()
        target = _name(value[len(_SYMREF) :].strip())
        if target not in refs:
            raise CloneUnreadableError("HEAD points at a branch that does not exist")
        value = refs[target]
    raise CloneUnreadableError("symbolic refs nest too deeply")


def _short_map(refs: dict[str, bytes], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for ref, value in refs.items():
        if ref.startswith(prefix) and not value.startswith(_SYMREF):
            out[ref.removeprefix(prefix)] = value.decode()
    return out


def read_refs(clone: Path) -> CloneRefs:
    """HEAD, branches, tags and stash presence of `clone`, read without running git.

    `head` is HEAD's symbolic target (`refs/heads/main`) or "detached". Tag values
    are the tag refs' own object ids (annotated tags are not peeled). Raises
    `clone_unreadable` when the refs are malformed, linked elsewhere or missing, and
    `clone_over_cap` when they are beyond gitops/limits.py.
    """
    try:
        with GitDir.open(clone) as gitdir:
            for rel in ("commondir", "reftable"):
                if gitdir.kind(rel) is not Kind.MISSING:
                    raise CloneUnreadableError(f"{rel} present; refs are not where git keeps them")
            head = _loose_value(gitdir, "HEAD")
            refs = _all_refs(gitdir)
    except TooLargeError as exc:
        raise _over(str(exc)) from exc
    except UnsafePathError as exc:
        raise CloneUnreadableError(str(exc)) from exc
    head_name = _name(head[len(_SYMREF) :].strip()) if head.startswith(_SYMREF) else DETACHED
    return CloneRefs(
        head=head_name,
        head_commit=_resolve(refs, head),
        branches=_short_map(refs, "refs/heads/"),
        tags=_short_map(refs, "refs/tags/"),
        stash="refs/stash" in refs,
    )
