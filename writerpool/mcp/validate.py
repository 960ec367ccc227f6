"""Checking tool arguments against the declared input schemas.

Only the keywords the tool table uses are supported, and an unsupported one is a
programming error. Messages name the argument and the broken rule, never the value
(a value may be a prompt, a path or a secret).
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

from writerpool.errors import WriterpoolError
from writerpool.mcp.tools import ToolSpec

_KNOWN = frozenset(
    {"type", "pattern", "minLength", "maxLength", "minimum", "maximum", "description"}
)
_SAFE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    # JSON Schema patterns follow ECMA-262, where `$` never matches before a final
    # newline; Python's `$` does, so anchor on the true end of the string.
    if pattern.endswith("$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _invalid(message: str) -> WriterpoolError:
    return WriterpoolError("input_invalid", message)


def _check_string(name: str, value: str, schema: dict[str, Any]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        raise _invalid(f"{name}: shorter than {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise _invalid(f"{name}: longer than {schema['maxLength']} characters")
    if "pattern" in schema and not _compiled(schema["pattern"]).search(value):
        raise _invalid(f"{name}: does not match the pattern {schema['pattern']}")


def _check_number(name: str, value: float, schema: dict[str, Any]) -> None:
    # NaN compares false with every bound, so it would pass them all.
    if not math.isfinite(value):
        raise _invalid(f"{name}: must be a finite number")
    if "minimum" in schema and value < schema["minimum"]:
        raise _invalid(f"{name}: below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise _invalid(f"{name}: above the maximum {schema['maximum']}")


def _check_property(name: str, value: object, schema: dict[str, Any]) -> None:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"unsupported schema keywords {sorted(unknown)}")
    kind = schema["type"]
    if kind == "string":
        if not isinstance(value, str):
            raise _invalid(f"{name}: must be a string")
        _check_string(name, value, schema)
    elif kind == "number":
        # bool is an int in Python but not a number in JSON.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(f"{name}: must be a number")
        _check_number(name, value, schema)
    elif kind == "integer":
        # JSON has one number type: 5.0 is an integer, 5.5 is not.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(f"{name}: must be an integer")
        if isinstance(value, float) and not value.is_integer():
            raise _invalid(f"{name}: must be an integer")
        _check_number(name, value, schema)
    else:
        raise ValueError(f"unsupported schema type {kind!r}")


def check_arguments(tool: ToolSpec, arguments: object) -> dict[str, Any]:
    """Return the arguments when they satisfy the tool's input schema, else raise
    WriterpoolError("input_invalid")."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise _invalid("arguments must be an object")
    extra = sorted(set(arguments) - set(tool.properties))
    if extra:
        shown = [k if isinstance(k, str) and _SAFE_NAME.fullmatch(k) else "<name>" for k in extra]
        raise _invalid(f"unexpected argument(s): {', '.join(shown)}")
    for name in tool.required:
        if name not in arguments:
            raise _invalid(f"missing required argument: {name}")
    for name, value in arguments.items():
        _check_property(name, value, tool.properties[name])
    return arguments
