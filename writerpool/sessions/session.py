"""One session's record: its plan, its agent while it runs, its turns, and what it
leaves as a tombstone once closed (its final turns and work)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from writerpool.errors import WriterpoolError
from writerpool.gitops.limits import LIMITS
from writerpool.sessions.launch import Agent, Launched
from writerpool.sessions.placement import SessionPlan
from writerpool.sessions.turns import Snapshot
from writerpool.sessions.work import CloneRefs, clone_work, other_work

if (
    TYPE_CHECKING
):  # types only: `serve` starts without the inspection's code (pool/writer/inspect.py)
    from writerpool.pool.writer.inspect import Inspection

log = logging.getLogger(__name__)


def _split(seen: Inspection | str) -> tuple[CloneRefs | str, bool | None]:
    if isinstance(seen, str):
        return seen, None
    return CloneRefs.seen(seen), seen.dirty


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
    # A container session's refs when it began, and (once closed) its work at close.
    start_refs: CloneRefs | None = None
    final_work: dict[str, Any] | None = None
    unread: str | None = None  # why the clone could not be seen, last time
    closing: Inspection | str | None = None  # the clone as seen at close
    # Between turns: (the last turn id, the clone as a view container saw it then).
    checked: tuple[str, Inspection | str] | None = None

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
            "agent": self.plan.profile.agent,
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
        if self.start_refs is None or self.writer is None:
            return other_work(self.plan.read_only)
        now, uncommitted = self._seen_now()
        if isinstance(now, str) and now != self.unread:
            log.warning("session %s: writer clone not seen: %s", self.id, now)
        self.unread = now if isinstance(now, str) else None  # logged once per change
        return clone_work(self.writer, self.start_refs, now, uncommitted, most)

    def keep_final_work(self) -> None:
        """Keep the bounded summary only: the refs read at start go with the agent."""
        self.final_work = self.work()
        self.start_refs = None
        self.closing = None

    def _seen_now(self) -> tuple[CloneRefs | str, bool | None]:
        """The clone's refs and whether it holds uncommitted changes: as seen at close,
        or between turns in a read-only view container beside pi, once per turn. While a
        turn runs, the refs of the last look and None (it cannot be told)."""
        launched = self.launched
        if self.closed_at is not None or launched is None or launched.slot is None:
            return _split(self.closing if self.closing is not None else "writer_not_leased")
        last = self.last_turn()
        if last is None or self.start_refs is None:
            return self.start_refs or "writer_not_leased", False  # admitted at its baseline
        if self.checked is None or self.checked[0] != last:
            if self.state() != "idle":
                earlier = _split(self.checked[1])[0] if self.checked else self.start_refs
                return earlier, None
            # Loaded on first use: `serve` answers its client's handshake sooner without it.
            from writerpool.pool.writer.inspect import VIEW  # noqa: PLC0415

            self.checked = (last, launched.slot.look(VIEW))
        return _split(self.checked[1])

    def keep_final_turns(self, agent: Agent) -> None:
        for public, own in self.turns.items():
            try:
                self.final_turns[public] = Kept.of(agent.turn(own))
            except WriterpoolError:
                continue  # the agent no longer keeps turns that old
