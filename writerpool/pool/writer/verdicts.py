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
from dataclasses import dataclass, field
from pathlib import Path

from writerpool.atomic import write_atomic
from writerpool.config.paths import WriterRecord

_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Verdict:
    code: str  # writer_leasable or why not (the clone's part of the guard only)
    reason: str
    problems: tuple[str, ...]
    # The recorded verdict's digest ("sha256:…" of its record; "" when not read from
    # one): a warm claim names the very record it relied on (pool/claims/warm_proof.py).
    digest: str = field(default="", compare=False)


def lease_count(writer_dir: Path) -> int | None:
    """How many times a session or command has taken the writer's lease (0: never);
    None when the count cannot be read, which no verdict matches."""
    try:
        text = WriterRecord(writer_dir).lease_count_file.read_text()
    except FileNotFoundError:
        return 0
    except OSError:
        return None
    return int(text) if text.strip().isdigit() else None


def advance(writer_dir: Path) -> None:
    """The clone may change: every verdict recorded so far stops being current. The
    caller holds the lease."""
    count = lease_count(writer_dir) or 0
    write_atomic(WriterRecord(writer_dir).lease_count_file, f"{count + 1}\n".encode())


def remember(writer_dir: Path, count: int | None, verdict: Verdict) -> None:
    """Record `verdict`, computed while the lease count was `count` (None: not recorded)."""
    if count is None:
        return
    record = {
        "count": count,
        "state": WriterRecord(writer_dir).state_digest(),
        "code": verdict.code,
        "reason": verdict.reason,
        "problems": list(verdict.problems)[:20],
    }
    write_atomic(WriterRecord(writer_dir).verdict_file, json.dumps(record).encode())


def current(writer_dir: Path) -> Verdict | None:
    """The recorded verdict when nothing has leased the writer since, else None."""
    try:
        with open(WriterRecord(writer_dir).verdict_file, "rb") as handle:
            raw = handle.read(_LIMIT)
        record = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    count = lease_count(writer_dir)
    if count is None or record.get("count") != count:
        return None
    if record.get("state") != WriterRecord(writer_dir).state_digest():
        return None
    problems = record.get("problems")
    if not isinstance(problems, list) or not isinstance(record.get("code"), str):
        return None
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    return Verdict(str(record["code"]), str(record.get("reason", "")),
                   tuple(map(str, problems)), digest)  # fmt: skip


def mark_changed(writer_dir: Path) -> None:
    """The holder could not inspect the clone at its session's end (a work tree over
    the read limits, say): the guard would fail alike and refuse the writer, so starts
    try it last until it is leased again. Holds the lease."""
    count = lease_count(writer_dir)
    if count is not None:
        write_atomic(WriterRecord(writer_dir).changed_file, f"{count}\n".encode())


def known_changed(writer_dir: Path) -> bool:
    """Whether a mark_changed is still current (nothing leased the writer since)."""
    try:
        text = WriterRecord(writer_dir).changed_file.read_text()
    except OSError:
        return False
    return text.strip().isdigit() and int(text) == lease_count(writer_dir)
