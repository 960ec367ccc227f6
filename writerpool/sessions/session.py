"""One session's record: its plan, its agent while it runs, its turns, and what it
leaves as a tombstone once closed (its final turns and work)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from writerpool.errors import WriterpoolError
from writerpool.gitops.limits import LIMITS
from writerpool.sessions.launch import Agent, Launched
from writerpool.sessions.placement import SessionPlan
from writerpool.sessions.turns import Snapshot
from writerpool.sessions.work import clone_work, other_work, read_clone

if TYPE_CHECKING:
    from writerpool.gitops.clone_read import CloneRefs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kept:
    """A turn as it ended, kept after its agent is gone (still paged on request)."""

    status: str
    text: str | None
    stop_reason: str | None
    started_at: object
    updated_at: object
    ended_at: object
    tool_calls: int = 0
    text_truncated: bool = False
    error: str | None = None

    @classmethod
    def of(cls, snap: Snapshot) -> Kept:
        return cls(
            snap.status,
            snap.text,
            snap.stop_reason,
            snap.started_at,
            snap.updated_at,
            snap.ended_at,
            int(getattr(snap, "tool_calls", 0) or 0),
            snap.text_truncated,
            snap.error,
        )


@dataclass
class Session:
    id: str
    plan: SessionPlan
    launched: Launched | None
    created_at: str
    # Fixed at start, so a tombstone still names them.
    writer: str | None = None
    base: dict[str, str] | None = None
    owner: str | None = None  # the service's client that started it (None: stdio)
    warm: bool = False  # it claimed a warm writer (the audit line of its start says so)
    # public turn id -> the agent's own turn id
    turns: dict[str, str] = field(default_factory=dict)
    # A closed session's turns as they ended (the agent is gone by then).
    final_turns: dict[str, Kept] = field(default_factory=dict)
    closed_at: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # A container session's clone, its refs when the session began, and (once closed)
    # its work as it was at close.
    clone: Path | None = None
    start_refs: CloneRefs | None = None
    final_work: dict[str, Any] | None = None
    unread: str | None = None  # why the clone's refs could not be read, last time
    uncommitted: bool | None = None  # known at close: the clone's uncommitted changes
    # Between turns: (the last turn id, whether the clone held uncommitted changes then).
    checked: tuple[str, bool | None] | None = None

    def last_turn(self) -> str | None:
        return next(reversed(self.turns), None) if self.turns else None

    def state(self) -> str:
        launched = self.launched
        if self.closed_at is not None or launched is None:
            return "closed"
        if not launched.agent.alive or launched.grant.lost:
            return "failed"
        last = self.last_turn()
        if last is not None and launched.agent.turn(self.turns[last]).status == "running":
            return "running"
        return "idle"

    def view(self, most: int = LIMITS.listed) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sessionId": self.id,
            "workspace": self.plan.workspace,
            "executionProfile": self.plan.profile_name,
            "permission": self.plan.profile.permission,
            "placement": self.plan.placement,
            "state": self.state(),
            "createdAt": self.created_at,
            "closedAt": self.closed_at,
            "turns": len(self.turns),
            "lastTurnId": self.last_turn(),
        }
        if self.plan.placement == "container":
            out["writer"] = self.writer
            out["base"] = self.base
        out["work"] = self.work(most)
        return out

    def work(self, most: int = LIMITS.listed) -> dict[str, Any]:
        if self.final_work is not None:
            if len(self.final_work["branchesChanged"]) <= most:
                return self.final_work
            shown = self.final_work["branchesChanged"][:most]
            return {**self.final_work, "branchesChanged": shown, "truncated": True}
        if self.clone is None or self.writer is None:
            return other_work(self.plan.read_only)
        now = read_clone(self.clone)
        if isinstance(now, str) and now != self.unread:
            log.warning("session %s: writer clone refs unreadable: %s", self.id, now)
        self.unread = now if isinstance(now, str) else None  # logged once per change
        return clone_work(self.writer, self.start_refs, now, self._uncommitted_now(), most)

    def keep_final_work(self) -> None:
        """Keep the bounded summary only: the refs read at start go with the agent."""
        self.final_work = self.work()
        self.start_refs = None
        self.clone = None

    def _uncommitted_now(self) -> bool | None:
        """Whether the clone holds uncommitted changes: as judged at close, or between
        turns in a read-only view container beside pi, once per turn (None while a turn
        runs, or when it cannot be told)."""
        launched = self.launched
        if self.closed_at is not None or launched is None or launched.slot is None:
            return self.uncommitted
        last = self.last_turn()
        if last is None:
            return False  # the lease admitted the writer at its baseline
        if self.checked is not None and self.checked[0] == last:
            return self.checked[1]
        if self.state() != "idle":
            return None
        from writerpool.pool.inspect import VIEW  # noqa: PLC0415 - pool code on use

        self.checked = (last, launched.slot.uncommitted(VIEW))
        return self.checked[1]

    def keep_final_turns(self, agent: Agent) -> None:
        for public, own in self.turns.items():
            try:
                self.final_turns[public] = Kept.of(agent.turn(own))
            except WriterpoolError:
                continue  # the agent no longer keeps turns that old
