"""How much is read from a writer's clone, at most: one table, sent with every request
to the inspection in a throwaway container on the writer's host (payload/clonetool); the
controller never reads a clone itself. A clone beyond a limit is refused or
summarised, never read further: what a clone holds must not size the server's memory,
its time, or its answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The JSON text of any tool answer stays below this (docs/tools.md).
ANSWER_MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class CloneLimits:
    refs: int = 20_000  # refs read in all, loose and packed together
    packed_refs_bytes: int = 32 * 1024 * 1024  # room for `refs` refs with long names
    ref_name_bytes: int = 1024  # a longer ref name makes the refs unreadable
    ref_file_bytes: int = 4096  # one loose ref (an object id or `ref: target`)
    message_chars: int = 500  # a commit subject, an author, an error text
    listed: int = 50  # names one answer lists; past it a count and `truncated`
    listed_bytes: int = 16 * 1024  # ... and at most this much JSON text of names

    def request(self) -> dict[str, int]:
        """The table as the clonetool receives it."""
        return asdict(self)


LIMITS = CloneLimits()
