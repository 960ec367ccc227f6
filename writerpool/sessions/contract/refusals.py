"""A tool's arguments validated by its model, or refused with `input_invalid`.

The message names the argument and the broken rule, never the value (a value may be a
prompt, a path or a secret): it is built from pydantic's error type, location and
context only. One rule is reported, in this order: unknown arguments (all of them),
a missing required one, then the first other error.
"""

from __future__ import annotations

import re
from typing import TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from writerpool.errors import WriterpoolError
from writerpool.sessions.contract.arguments import ToolArguments

Model = TypeVar("Model", bound=ToolArguments)

_SAFE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_UNKNOWN = frozenset({"extra_forbidden", "invalid_key"})
_NOT_AN_OBJECT = frozenset({"model_type", "model_attributes_type", "dict_type"})
# The rule each pydantic error type stands for, filled from its context.
_RULES = {
    "string_type": "must be a string",
    "string_too_short": "shorter than {min_length} characters",
    "string_too_long": "longer than {max_length} characters",
    "string_pattern_mismatch": "does not match the pattern {pattern}",
    "float_type": "must be a number",
    "int_type": "must be an integer",
    "finite_number": "must be a finite number",
    "greater_than_equal": "below the minimum {ge}",
    "less_than_equal": "above the maximum {le}",
}


def _invalid(message: str) -> WriterpoolError:
    return WriterpoolError("input_invalid", message)


def _shown(key: object) -> str:
    return key if isinstance(key, str) and _SAFE_NAME.fullmatch(key) else "<name>"


def _bound(value: object) -> object:
    """60.0 shown as 60, as the schema states it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _rule(error: ErrorDetails) -> str:
    name = ".".join(str(part) for part in error["loc"])
    template = _RULES.get(error["type"])
    if template is None:
        return f"{name}: is not valid"
    context = {key: _bound(value) for key, value in error.get("ctx", {}).items()}
    return f"{name}: {template.format(**context)}"


def refusal(errors: list[ErrorDetails]) -> WriterpoolError:
    """The one input_invalid error that stands for pydantic's list of errors."""
    if any(e["type"] in _NOT_AN_OBJECT and not e["loc"] for e in errors):
        return _invalid("arguments must be an object")
    unknown = sorted({_shown(e["loc"][-1]) for e in errors if e["type"] in _UNKNOWN})
    if unknown:
        return _invalid(f"unexpected argument(s): {', '.join(unknown)}")
    missing = [e for e in errors if e["type"] == "missing"]
    if missing:
        return _invalid(f"missing required argument: {missing[0]['loc'][-1]}")
    return _invalid(_rule(errors[0]))


def parse(model: type[Model], arguments: object) -> Model:
    """The arguments as `model`, when they satisfy it (None means none given), else raise
    WriterpoolError("input_invalid")."""
    try:
        return model.model_validate({} if arguments is None else arguments)
    except ValidationError as exc:
        raise refusal(exc.errors(include_url=False, include_input=False)) from None
