"""One pydantic model per tool: its arguments as clients send them (camelCase), the JSON
input schema `tools/list` publishes (`input_schema`), their validation and their types.

Validation is strict, as JSON is: no "1" for a number, no true for an integer; an
integer may come as 5.0 (JSON has one number type). Every model refuses unknown
arguments, and an optional argument is given or left out, never null. Patterns run on
pydantic's Rust engine, where `$` matches only at the true end (as in ECMA-262; Python's
`re` would match before a final newline).

Descriptions state every range and default in words: some clients (Codex) drop
`pattern`, `minimum`, `maximum` and length limits from the schemas they show the model.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

ALIAS_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
SESSION_ID_PATTERN = r"^s-[0-9a-f]{16}$"
TURN_ID_PATTERN = r"^t-[1-9][0-9]{0,5}$"
# A branch name as a client would type it; the pool applies git's full rules.
BASE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$"
BASE_MAX_CHARS = 200
MESSAGE_MAX_CHARS = 65536
WAIT_MAX_SECONDS = 60
# A page of a turn's final text, in characters. The default page, inside the JSON body,
# stays below what Claude Code and Codex show a model without cutting or moving the
# result to a file (measured with both: tests/clients/).
TEXT_PAGE_DEFAULT = 8000
TEXT_PAGE_MAX = 65536
TEXT_OFFSET_MAX = 1 << 20

# Schema keys pydantic adds that the published contract leaves out: titles are noise to a
# model, and defaults are said in each description's words.
_NOISE = frozenset({"title", "default"})


def _integral(value: object) -> object:
    """5.0 is the integer 5 in JSON; anything else goes to the strict int check as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Alias = Annotated[str, StringConstraints(pattern=ALIAS_PATTERN)]
SessionId = Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]
TurnId = Annotated[str, StringConstraints(pattern=TURN_ID_PATTERN)]
Base = Annotated[str, StringConstraints(pattern=BASE_PATTERN, max_length=BASE_MAX_CHARS)]
Message = Annotated[str, StringConstraints(min_length=1, max_length=MESSAGE_MAX_CHARS)]
JsonInt = Annotated[int, BeforeValidator(_integral)]


class ToolArguments(BaseModel):
    """The arguments of one tool call, validated."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        allow_inf_nan=False,
        alias_generator=to_camel,
        regex_engine="rust-regex",
    )


def input_schema(model: type[ToolArguments]) -> dict[str, Any]:
    """The JSON schema a tool publishes for its arguments: the model's, without pydantic's
    titles and defaults, an optional argument shown by its own type (never null)."""
    schema = model.model_json_schema(by_alias=True)
    properties: dict[str, Any] = {}
    for name, declared in schema.get("properties", {}).items():
        options = declared.pop("anyOf", None)
        if options is not None:
            (given,) = [o for o in options if o != {"type": "null"}]
            declared = {**given, **declared}  # noqa: PLW2901 - the optional type, unwrapped
        properties[name] = {k: v for k, v in declared.items() if k not in _NOISE}
    return {
        "type": "object",
        "properties": properties,
        "required": list(schema.get("required", [])),
        "additionalProperties": False,
    }


class CapabilitiesGet(ToolArguments):
    pass


class SessionStart(ToolArguments):
    workspace: Alias = Field(
        description="Workspace alias, as listed by pi_capabilities_get (lower-case letters, "
        "digits, '-' and '_', starting with a letter, at most 64 characters)."
    )
    execution_profile: Alias | None = Field(
        None,
        description="Execution profile alias from pi_capabilities_get; omit it for the "
        "configured default profile, which is read-only. Use a coding profile to change files.",
    )
    base: Base | None = Field(
        None,
        description="Branch the writer's clone starts from, only for a coding session in a "
        f"container workspace (at most {BASE_MAX_CHARS} characters; letters, digits and "
        ". _ / -, not starting with - or .). Omit it for the workspace's default base.",
    )

    @field_validator("execution_profile", "base", mode="before")
    @classmethod
    def _given_or_left_out(cls, value: object) -> object:
        if value is None:
            raise PydanticCustomError("string_type", "an optional argument is never null")
        return value


class SessionList(ToolArguments):
    pass


_SESSION_DESCRIPTION = "The sessionId pi_session_start returned ('s-' and 16 hex digits)."


class SessionGet(ToolArguments):
    session_id: SessionId = Field(description=_SESSION_DESCRIPTION)


class SessionPrompt(ToolArguments):
    session_id: SessionId = Field(description=_SESSION_DESCRIPTION)
    message: Message = Field(
        description=f"The instruction for the agent, 1 to {MESSAGE_MAX_CHARS} characters."
    )


class TurnGet(ToolArguments):
    session_id: SessionId = Field(description=_SESSION_DESCRIPTION)
    turn_id: TurnId = Field(
        description="The turnId pi_session_prompt returned ('t-' and a number)."
    )
    wait_seconds: float = Field(
        0.0,
        ge=0,
        le=WAIT_MAX_SECONDS,
        description=f"Seconds to wait for the turn to end, from 0 to {WAIT_MAX_SECONDS} "
        "(default 0: answer at once). While waiting the server sends progress notifications; "
        "call again to wait longer.",
    )
    offset: JsonInt = Field(
        0,
        ge=0,
        le=TEXT_OFFSET_MAX,
        description="Where the page of the final text starts, in characters from 0 "
        "(default 0). Pass the nextOffset of the previous page to read on; at most "
        f"{TEXT_OFFSET_MAX}.",
    )
    limit: JsonInt = Field(
        TEXT_PAGE_DEFAULT,
        ge=1,
        le=TEXT_PAGE_MAX,
        description=f"Most characters of final text in one page, 1 to {TEXT_PAGE_MAX} "
        f"(default {TEXT_PAGE_DEFAULT}, which clients show whole).",
    )


class SessionAbort(ToolArguments):
    session_id: SessionId = Field(description=_SESSION_DESCRIPTION)


class SessionClose(ToolArguments):
    session_id: SessionId = Field(description=_SESSION_DESCRIPTION)
