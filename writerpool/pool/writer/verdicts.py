"""The session guard's last verdict on a writer's clone, kept with what it was computed from.

A clone changes only while someone holds the writer's lease: a session or an operator
command. Each such holder advances the writer's lease count when it takes the lease
(Lease.acquire, unless it only judges the writer); a verdict records the count it was
computed under and the digest of the writer's state, and is current only while both
still match. So a current verdict is what an inspection would find now, and a session
start can skip a writer whose clone it knows to be dirty, or take a clean one without
inspecting it again. Readiness (settings, acceptance, control) is never cached: it is
judged on every start.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from writerpool.atomic import write_atomic

COUNT = "lease-count"
VERDICT = "verdict.json"
CHANGED = "changed"
# Files of a writer's directory that do not make a writer (a removed writer may keep them).
BOOKKEEPING = frozenset({"lease", COUNT, VERDICT, CHANGED})
_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Verdict:
    code: str  # writer_leasable or why not (the clone's part of the guard only)
    reason: str
    problems: tuple[str, ...]


def lease_count(writer_dir: Path) -> int | None:
    """How many times a session or command has taken the writer's lease (0: never);
    None when the count cannot be read, which no verdict matches."""
    try:
        text = (writer_dir / COUNT).read_text()
    except FileNotFoundError:
        return 0
    except OSError:
        return None
    return int(text) if text.strip().isdigit() else None


def advance(writer_dir: Path) -> None:
    """The clone may change: every verdict recorded so far stops being current. The
    caller holds the lease."""
    count = lease_count(writer_dir) or 0
    write_atomic(writer_dir / COUNT, f"{count + 1}\n".encode())


def _state_digest(writer_dir: Path) -> str:
    try:
        return hashlib.sha256((writer_dir / "state.json").read_bytes()).hexdigest()
    except OSError:
        return ""


def remember(writer_dir: Path, count: int | None, verdict: Verdict) -> None:
    """Record `verdict`, computed while the lease count was `count` (None: not recorded)."""
    if count is None:
        return
    record = {
        "count": count,
        "state": _state_digest(writer_dir),
        "code": verdict.code,
        "reason": verdict.reason,
        "problems": list(verdict.problems)[:20],
    }
    write_atomic(writer_dir / VERDICT, json.dumps(record).encode())


def current(writer_dir: Path) -> Verdict | None:
    """The recorded verdict when nothing has leased the writer since, else None."""
    try:
        with open(writer_dir / VERDICT, "rb") as handle:
            record = json.loads(handle.read(_LIMIT))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    count = lease_count(writer_dir)
    if count is None or record.get("count") != count:
        return None
    if record.get("state") != _state_digest(writer_dir):
        return None
    problems = record.get("problems")
    if not isinstance(problems, list) or not isinstance(record.get("code"), str):
        return None
    return Verdict(str(record["code"]), str(record.get("reason", "")), tuple(map(str, problems)))


def mark_changed(writer_dir: Path) -> None:
    """The holder could not inspect the clone at its session's end (a work tree over
    the read limits, say): the guard would fail alike and refuse the writer, so starts
    try it last until it is leased again. Holds the lease."""
    count = lease_count(writer_dir)
    if count is not None:
        write_atomic(writer_dir / CHANGED, f"{count}\n".encode())


def known_changed(writer_dir: Path) -> bool:
    """Whether a mark_changed is still current (nothing leased the writer since)."""
    try:
        text = (writer_dir / CHANGED).read_text()
    except OSError:
        return False
    return text.strip().isdigit() and int(text) == lease_count(writer_dir)
