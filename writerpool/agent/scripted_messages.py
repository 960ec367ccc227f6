"""A scripted Anthropic Messages API provider, so Claude Code runs offline.

It serves `POST /v1/messages` (streamed as Anthropic's Server-Sent Events: message_start,
content_block_start/delta/stop for text and `tool_use` blocks with input_json_delta,
message_delta with the stop reason and usage, message_stop; or one JSON message when no
stream is asked), `POST /v1/messages/count_tokens`, `GET /v1/models`, and a harmless 200
to any other GET or HEAD (the probes Claude Code makes). The step is chosen as the
chat-completions provider chooses it (writerpool.agent.scripted_script): the last user
message that carries no tool results picks the script entry, the assistant messages after
it the step. The portable `bash` call becomes a call of the shell tool the request
declares (Claude Code's `Bash`, input `{"command": ...}`). A request that declares no tools
(a title or a summary Claude Code asks for beside the turn) gets text, never a tool call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from writerpool.agent.scripted_script import (
    FINAL_TEXT,
    SHELL_TOOL,
    Step,
    ToolCall,
    pieces,
    shell_command,
)
from writerpool.agent.scripted_server import ScriptedServer, ScriptHandler, sse, tool_names

USAGE = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
         "cache_read_input_tokens": 0}  # fmt: skip


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def position(messages: list[Any]) -> tuple[str, int, str]:
    """The last prompt's text (a user message with no tool results), how many assistant
    messages follow it, and the text of the tool results after it. Messages of any other
    role are passed over: Claude Code 2.1.332 sends its environment as a `system` message
    after the prompt."""
    answered = 0
    results: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict):
            continue
        blocks = _blocks(message)
        if message.get("role") == "assistant":
            answered += 1
            continue
        if message.get("role") != "user":
            continue
        tool_results = [b for b in blocks if b.get("type") == "tool_result"]
        if not tool_results:
            text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            return text, answered, "\n".join(reversed(results))
        results.extend(_result_text(b) for b in reversed(tool_results))
    return "", answered, "\n".join(reversed(results))


def tool_use(call: ToolCall, declared: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The tool name and input to send for a script's call, given the declared tools."""
    command = shell_command(call)
    if command is not None:
        shell = next((n for n in declared if n.lower() == SHELL_TOOL), None)
        if shell is not None:
            return shell, {"command": command, "description": "Run the scripted command"}
    return call.name, dict(call.arguments)


def _content(step: Step, declared: tuple[str, ...]) -> list[dict[str, Any]]:
    if step.tool_calls is None:
        return [{"type": "text", "text": step.text or ""}]
    blocks = []
    for call in step.tool_calls:
        name, arguments = tool_use(call, declared)
        blocks.append({"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}",
                       "name": name, "input": arguments})  # fmt: skip
    return blocks


def _stop_reason(step: Step) -> str:
    return "end_turn" if step.tool_calls is None else "tool_use"


def message_body(step: Step, model: str, declared: tuple[str, ...]) -> dict[str, Any]:
    """A non-streamed answer."""
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
            "model": model, "content": _content(step, declared),
            "stop_reason": _stop_reason(step), "stop_sequence": None, "usage": USAGE}  # fmt: skip


def stream_events(step: Step, model: str, declared: tuple[str, ...]) -> Iterator[bytes]:
    """The events of one streamed answer, in order, framed."""
    start = {**message_body(step, model, declared), "content": [], "stop_reason": None,
             "usage": {**USAGE, "output_tokens": 1}}  # fmt: skip
    yield sse("message_start", {"type": "message_start", "message": start})
    yield sse("ping", {"type": "ping"})
    slow = step.delay_seconds > 0
    for index, block in enumerate(_content(step, declared)):
        head: dict[str, Any]
        if block["type"] == "text":
            head = {"type": "text", "text": ""}
            parts = pieces(block["text"], slow, step.chunk_chars)
            deltas = [{"type": "text_delta", "text": p} for p in parts]
        else:
            head = {**block, "input": {}}
            parts = pieces(json.dumps(block["input"]), slow)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
        start_block = {"type": "content_block_start", "index": index, "content_block": head}
        yield sse("content_block_start", start_block)
        for delta in deltas:
            yield sse("content_block_delta",
                      {"type": "content_block_delta", "index": index, "delta": delta})  # fmt: skip
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield sse("message_delta", {"type": "message_delta", "usage": {"output_tokens": 5},
                                "delta": {"stop_reason": _stop_reason(step),
                                          "stop_sequence": None}})  # fmt: skip
    yield sse("message_stop", {"type": "message_stop"})


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


class _MessagesHandler(ScriptHandler):
    def get(self) -> None:
        self.note()
        if _route(self.path) in ("/v1/models", "/models"):
            models = [{"type": "model", "id": m, "display_name": m,
                       "created_at": "2025-01-01T00:00:00Z"}
                      for m in self.provider.script.models]  # fmt: skip
            self.send_json(200, {"data": models, "has_more": False,
                                 "first_id": models[0]["id"] if models else None,
                                 "last_id": models[-1]["id"] if models else None})  # fmt: skip
        else:
            self.send_json(200, {})

    def post(self) -> None:
        route = _route(self.path)
        if route not in ("/v1/messages", "/v1/messages/count_tokens"):
            self.note()
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                           "message": "not found"}})  # fmt: skip
            return
        request = self.read_json()
        if request is None:
            return
        self.note(request)
        messages = request.get("messages")
        if not isinstance(messages, list):
            problem = {"type": "invalid_request_error", "message": "messages: a list is required"}
            self.send_json(400, {"type": "error", "error": problem})
            return
        if route.endswith("count_tokens"):
            self.send_json(200, {"input_tokens": 10})
            return
        self._answer(request, messages)

    def _answer(self, request: dict[str, Any], messages: list[Any]) -> None:
        model = str(request.get("model", ""))
        step = self.provider.script.step_at(*position(messages))
        declared = tool_names(request)
        if step.tool_calls is not None and not declared:
            step = Step(text=FINAL_TEXT)
        key = self.headers.get("x-api-key") or self.headers.get("Authorization")
        self.provider.record(model, key)
        if request.get("stream"):
            events = list(stream_events(step, model, declared))
            self.send_events(events, step.delay_seconds / max(1, len(events) - 1))
        else:
            self.send_json(200, message_body(step, model, declared))


class ScriptedMessages(ScriptedServer):
    """The Anthropic Messages provider: `start()`, `.port`, `stop()`; its base URL for
    `ANTHROPIC_BASE_URL` is `origin()` (Claude Code adds `/v1/messages` itself)."""

    handler_class = _MessagesHandler
    thread_name = "scripted-messages"

    def origin(self, host: str = "127.0.0.1") -> str:
        return self.base_url(host).removesuffix("/v1")
