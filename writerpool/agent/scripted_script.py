"""What a scripted provider plays, whichever API it speaks: a script of steps.

A script entry is chosen by the last user message (the first entry whose `match` occurs
in it) and the step by how many answers follow that message, so the choice is made from
a request alone and any number of agents can share one server. The same script drives
every wire (chat completions, Anthropic Messages, OpenAI Responses): a tool call named
`bash` whose `command` is a string is the portable shell call, which each wire turns into
the shell tool its agent declares (see `shell_command`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

FINAL_TEXT = "done"
TOOL_RESULTS = "{tool_results}"
CHUNK_CHARS = 16  # fast steps: pieces of this size
SLOW_CHUNKS = 20  # slow steps: spread over this many pieces at least
SHELL_TOOL = "bash"  # the portable name of "run this shell command"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(_Strict):
    name: str = Field(min_length=1, max_length=64)
    arguments: dict[str, JsonValue] = {}


class Step(_Strict):
    """One assistant answer: text, or tool calls (the agent runs them and asks again)."""

    text: str | None = None
    tool_calls: list[ToolCall] | None = Field(default=None, min_length=1)
    delay_seconds: float = Field(default=0.0, ge=0, le=3600)
    # Stream the text in pieces of this many characters (real models send small deltas).
    chunk_chars: int | None = Field(default=None, ge=1, le=65536)

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        if (self.text is None) == (self.tool_calls is None):
            raise ValueError("a step has exactly one of text or tool_calls")
        return self


class ScriptEntry(_Strict):
    match: str = Field(min_length=1)
    steps: list[Step]


class Script(_Strict):
    scripts: list[ScriptEntry] = []
    default: list[Step] = []
    models: list[str] = ["scripted-model"]

    @classmethod
    def load(cls, path: Path) -> Script:
        return cls.model_validate_json(path.read_bytes())

    def steps_for(self, last_user_text: str) -> list[Step]:
        for entry in self.scripts:
            if entry.match in last_user_text:
                return entry.steps
        return self.default

    def step_at(self, user_text: str, answered: int, results: str) -> Step:
        """The step to play after `answered` answers to `user_text`.

        A text step may hold `{tool_results}`: it is replaced by `results`, the tool
        results since that user message, so a test can see what the agent's tools returned.
        """
        steps = self.steps_for(user_text)
        if answered >= len(steps):
            return Step(text=FINAL_TEXT)
        step = steps[answered]
        if step.text is not None and TOOL_RESULTS in step.text:
            return step.model_copy(update={"text": step.text.replace(TOOL_RESULTS, results)})
        return step

    def step_for(self, messages: list[Any]) -> Step:
        """The step for a chat-completions request's messages."""
        return self.step_at(*_position(messages))


def shell_command(call: ToolCall) -> str | None:
    """The command of a portable shell call, else None (the call is played as written)."""
    command = call.arguments.get("command")
    return command if call.name == SHELL_TOOL and isinstance(command, str) else None


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _position(messages: list[Any]) -> tuple[str, int, str]:
    """The last user message's text, how many assistant messages follow it, and the
    text of the tool results that follow it (chat-completions messages)."""
    answered = 0
    results: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            return _message_text(message), answered, "\n".join(reversed(results))
        if role == "assistant":
            answered += 1
        elif role == "tool":
            results.append(_message_text(message))
    return "", answered, "\n".join(reversed(results))


def pieces(text: str, slow: bool, chunk_chars: int | None = None) -> list[str]:
    """A streamed text's deltas: small pieces, smaller still for a slow step."""
    if not text:
        return [""]
    size = max(1, len(text) // SLOW_CHUNKS) if slow else CHUNK_CHARS
    size = chunk_chars or min(size, CHUNK_CHARS)
    return [text[i : i + size] for i in range(0, len(text), size)]
