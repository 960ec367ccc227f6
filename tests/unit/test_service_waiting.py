"""The cap on connections that wait for a request head (writerpool/service/conns.py): past
MAX_WAITING the oldest are closed, but never one younger than MIN_AGE."""

from __future__ import annotations

from writerpool.service.conns import MAX_WAITING, MIN_AGE, _Waiting


class _Loop:
    """A loop whose clock the test sets; timers are recorded, not run."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[float] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: object, *args: object) -> object:
        self.timers.append(self.now + delay)
        return object()  # _Waiting only keeps it


class _Conn:
    def __init__(self, loop: _Loop) -> None:
        self.loop = loop
        self.dropped: str | None = None

    def drop(self, why: str) -> None:
        self.dropped = why


def _admit(waiting: _Waiting, loop: _Loop, count: int) -> list[_Conn]:
    conns = [_Conn(loop) for _ in range(count)]
    for conn in conns:
        waiting.admit(conn)  # type: ignore[arg-type]
    return conns


def test_the_oldest_past_the_cap_are_closed_and_the_newest_stay() -> None:
    loop, waiting = _Loop(), _Waiting()
    old = _admit(waiting, loop, MAX_WAITING + 40)
    loop.now = MIN_AGE + 0.5
    new = _admit(waiting, loop, 10)
    dropped = [c for c in old + new if c.dropped]
    assert dropped == old[:50], "exactly the 50 oldest"
    assert all(c.dropped == "evicted" for c in dropped)
    assert len(waiting.conns) == MAX_WAITING and waiting.evicted == 50


def test_connections_younger_than_min_age_are_kept_past_the_cap_until_a_later_round() -> None:
    loop, waiting = _Loop(), _Waiting()
    burst = _admit(waiting, loop, MAX_WAITING + 5)
    assert not any(c.dropped for c in burst), "a burst may hold requests not yet read"
    assert loop.timers == [MIN_AGE], "one later round is scheduled"
    loop.now = MIN_AGE
    waiting._round(loop)  # type: ignore[arg-type]  # the scheduled round runs
    assert [c for c in burst if c.dropped] == burst[:5]


def test_a_connection_that_sent_its_head_no_longer_counts() -> None:
    loop, waiting = _Loop(), _Waiting()
    conns = _admit(waiting, loop, MAX_WAITING)
    for conn in conns[:10]:
        waiting.leave(conn)  # type: ignore[arg-type]
    loop.now = MIN_AGE + 1
    _admit(waiting, loop, 10)
    assert not any(c.dropped for c in conns), "64 waiting is within the cap"
