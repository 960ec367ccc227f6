"""Text that leaves writerpool is valid UTF-8, whatever bytes it was made from.

Names and output from a writer's clone are read with Python's `surrogateescape`: an
undecodable byte becomes a lone surrogate (U+DC80..U+DCFF), so the name stays its bytes
for the pool (collection, digests). JSON may also carry lone surrogates (`"\\ud800"`).
Neither can be encoded as UTF-8: a client's answer holding one cannot be sent at all.
So text that reaches a client is made valid here, visibly: an undecodable byte shows
as `\\xNN` (the byte, as `writer log` and Python show it) and any other lone surrogate
as `\\uDNNN`; the rest of the text is kept as it is.
"""

from __future__ import annotations

import re
from typing import Any

_LONE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    point = ord(match.group(0))
    if 0xDC80 <= point <= 0xDCFF:  # an undecodable byte, as surrogateescape keeps it
        return f"\\x{point - 0xDC00:02x}"
    return f"\\u{point:04x}"


def valid_text(text: str) -> str:
    """`text` with each lone surrogate shown escaped (see the module doc)."""
    if _LONE.search(text) is None:  # the common case: nothing to copy
        return text
    return _LONE.sub(_escape, text)


def decoded(raw: bytes) -> str:
    """Bytes as text: UTF-8, an undecodable byte shown as `\\xNN`."""
    return valid_text(raw.decode("utf-8", "surrogateescape"))


def valid_json(value: Any) -> Any:
    """A JSON-ready value (dicts, lists, strings, numbers) whose strings and keys are
    all valid text; the value itself when nothing needed a change. Bounded by the
    value's size (answers are capped before they get here)."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {
            (valid_text(k) if isinstance(k, str) else k): valid_json(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [valid_json(item) for item in value]
    return value
