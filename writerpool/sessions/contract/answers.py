"""Every tool answer valid UTF-8 and under ANSWER_MAX_BYTES (gitops/limits.py), by
construction; `sendable` is the last guard every answer goes through.

Each answer that could grow is built as a bounded summary (sessions/work.py for a session's
work, sessions/turns.py for a page of text); the session list fits its share here. What is
built over the cap anyway is a bug, answered with a code instead of sent.

Text from a clone or an agent is made valid where its bytes become text (utf8.py); what
still holds a lone surrogate here is shown escaped the same way. An answer that cannot be
encoded as JSON at all fails its own call (`answer_unencodable`): a transport that meets
an unencodable message ends, and every other call of its client with it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from writerpool.gitops.limits import ANSWER_MAX_BYTES
from writerpool.report import sanitize
from writerpool.utf8 import valid_json

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


def _error(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": sanitize(message)}}


def sendable(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` as it may be sent: its text valid, or the error answer_unencodable when it
    is no JSON object at all, or answer_too_large when its JSON text is over the cap."""
    try:
        body = valid_json(body)  # recursive, as json.dumps: a deep body fails either
        size = len(json.dumps(body, sort_keys=True, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError) as exc:
        log.error("tool %s built an answer that is not JSON: %s", name, type(exc).__name__)
        return _error("answer_unencodable", "the answer could not be encoded as JSON")
    if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
        log.error("tool %s built an answer that is not a tool body", name)
        return _error("answer_unencodable", "the answer is not a tool result")
    if size <= ANSWER_MAX_BYTES:
        return body
    log.error("tool %s built an answer of %d bytes, over the cap", name, size)
    return _error("answer_too_large", f"the answer would exceed {ANSWER_MAX_BYTES} bytes")
