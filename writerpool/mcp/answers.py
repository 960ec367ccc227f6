"""Every tool answer under ANSWER_MAX_BYTES (gitops/limits.py), by construction.

Each answer that could grow is built as a bounded summary (mcp/work.py for a session's
work, mcp/turns.py for a page of text); the session list fits its share here. What is
built over the cap anyway is a bug, answered with a code instead of sent.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from writerpool.gitops.limits import ANSWER_MAX_BYTES
from writerpool.report import sanitize

log = logging.getLogger(__name__)

# pi_session_list names fewer changed branches per session than pi_session_get, and
# leaves out the oldest closed sessions past its share of the answer cap.
LIST_NAMED = 5
LIST_BYTES = ANSWER_MAX_BYTES - 8 * 1024


def fit_list(views: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """The views whose JSON text fits `budget`, oldest closed sessions left out first,
    then the oldest of the rest; and how many were left out. Order is kept. Bounded by
    the number of sessions a server keeps."""
    sizes = [len(json.dumps(v)) for v in views]
    total = sum(sizes)
    closed = [i for i, v in enumerate(views) if v["state"] == "closed"]
    others = [i for i, v in enumerate(views) if v["state"] != "closed"]
    dropped: set[int] = set()
    for index in closed + others:
        if total <= budget:
            break
        dropped.add(index)
        total -= sizes[index]
    return [v for i, v in enumerate(views) if i not in dropped], len(dropped)


def within_cap(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body`, or the error answer_too_large when its JSON text is over the cap."""
    size = len(json.dumps(body, sort_keys=True))
    if size <= ANSWER_MAX_BYTES:
        return body
    log.error("tool %s built an answer of %d bytes, over the cap", name, size)
    message = sanitize(f"the answer would exceed {ANSWER_MAX_BYTES} bytes")
    return {"ok": False, "error": {"code": "answer_too_large", "message": message}}
