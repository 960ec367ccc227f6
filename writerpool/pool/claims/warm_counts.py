"""How many writers the warm pool keeps where: each container workspace's warm count on
each host its writers are placed on (config/modes.py warm_by_host), and the backoff of a
place none of whose writers can be warmed now."""

from __future__ import annotations

import time

from writerpool.config.modes import ExecutionModes

# A workspace's writers on one host: (alias, host).
Place = tuple[str, str]

FILL_EVERY_SECONDS = 1.0
# After a round that warmed nothing (every writer busy or refused), a place is tried
# again after 1, 2, 4 … seconds up to this; a session's end tries it at once.
BACKOFF_MAX_SECONDS = 10.0


def wanted(modes: ExecutionModes) -> dict[Place, int]:
    """Each place's warm count (0 omitted). Bounded by the workspaces times their hosts
    (at most 16 each)."""
    counts: dict[Place, int] = {}
    for alias, entry in modes.workspaces.items():
        if entry.container is not None:
            for host, count in entry.container.warm_by_host().items():
                counts[(alias, host)] = count
    return counts


class Backoff:
    """When each place may be tried again. Not thread-safe: the pool's fill owns it."""

    def __init__(self) -> None:
        self._retry: dict[Place, tuple[int, float]] = {}  # (failed rounds, next try)

    def due(self, place: Place) -> bool:
        return time.monotonic() >= self._retry.get(place, (0, 0.0))[1]

    def failing(self, place: Place) -> bool:
        """Whether the place's last round warmed nothing (its refusal was said already)."""
        return place in self._retry

    def failed(self, place: Place) -> None:
        count = self._retry.get(place, (0, 0.0))[0] + 1
        wait = min(FILL_EVERY_SECONDS * 2 ** min(count - 1, 8), BACKOFF_MAX_SECONDS)
        self._retry[place] = (count, time.monotonic() + wait)

    def warmed(self, place: Place) -> None:
        self._retry.pop(place, None)

    def wake(self) -> None:
        """Every place is due at the next fill (a writer was released)."""
        self._retry = {place: (count, 0.0) for place, (count, _) in self._retry.items()}
