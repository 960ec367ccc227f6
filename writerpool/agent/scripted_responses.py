"""A scripted OpenAI Responses API provider, so Codex runs offline.

It serves `POST /v1/responses` (streamed as Responses events: response.created,
response.output_item.added/done, response.output_text.delta, function-call argument
deltas, response.completed with usage; or one JSON response when no stream is asked),
`GET /v1/models`, and a harmless 200 to any other GET or HEAD. The step is chosen as the
chat-completions provider chooses it (writerpool.agent.scripted_script) from the request's
`input` items: the last user message picks the script entry, the answers after it (runs
of output items: reasoning, messages, calls) the step. The portable `bash` call becomes a
call of the shell tool the request declares: `exec_command` (`{"cmd": ...}`),
`shell_command` (`{"command": ...}`) or `shell` (`{"command": ["bash", "-lc", ...]}`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from writerpool.agent.scripted_script import Step, ToolCall, pieces, shell_command
from writerpool.agent.scripted_server import ScriptedServer, ScriptHandler, sse, tool_names

USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
         "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
         "total_tokens": 15}  # fmt: skip
_OUTPUT_ITEMS = frozenset({"message", "reasoning", "function_call", "custom_tool_call",
                           "local_shell_call", "web_search_call"})  # fmt: skip
_RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output",
                           "local_shell_call_output"})  # fmt: skip


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def _result(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, dict):  # {"content": ..., "success": ...} in some versions
        output = output.get("content", "")
    if isinstance(output, list):
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return "" if output is None else str(output)


def position(items: list[Any]) -> tuple[str, int, str]:
    """The last user message's text, how many answers follow it, and the text of the
    tool results after it."""
    answered, in_answer = 0, False
    results: list[str] = []
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role == "user":
            return _text(item), answered, "\n".join(reversed(results))
        answer_item = kind in _OUTPUT_ITEMS and role in (None, "assistant")
        if answer_item and not in_answer:
            answered += 1
        in_answer = answer_item
        if kind in _RESULT_ITEMS:
            results.append(_result(item))
    return "", answered, "\n".join(reversed(results))


def function_call(call: ToolCall, declared: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The function name and arguments to send for a script's call."""
    command = shell_command(call)
    if command is not None:
        if "exec_command" in declared:
            return "exec_command", {"cmd": command}
        if "shell_command" in declared:
            return "shell_command", {"command": command}
        if "shell" in declared:
            return "shell", {"command": ["bash", "-lc", command]}
    return call.name, dict(call.arguments)


def output_items(step: Step, declared: tuple[str, ...]) -> list[dict[str, Any]]:
    """The completed output items of one answer."""
    if step.tool_calls is None:
        part = {"type": "output_text", "text": step.text or "", "annotations": []}
        return [{"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                 "status": "completed", "content": [part]}]  # fmt: skip
    items = []
    for call in step.tool_calls:
        name, arguments = function_call(call, declared)
        items.append({"id": f"fc_{uuid.uuid4().hex[:24]}", "type": "function_call",
                      "status": "completed", "name": name, "arguments": json.dumps(arguments),
                      "call_id": f"call_{uuid.uuid4().hex[:24]}"})  # fmt: skip
    return items


def response_body(
    ident: str, model: str, output: list[dict[str, Any]], done: bool
) -> dict[str, Any]:
    return {"id": ident, "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed" if done else "in_progress", "output": output,
            "usage": USAGE if done else None}  # fmt: skip


def _item_events(index: int, item: dict[str, Any], step: Step) -> Iterator[dict[str, Any]]:
    slow = step.delay_seconds > 0
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "content": []}}  # fmt: skip
        part = {"type": "output_text", "text": "", "annotations": []}
        yield {"type": "response.content_part.added", **where, "content_index": 0, "part": part}
        for piece in pieces(text, slow, step.chunk_chars):
            yield {"type": "response.output_text.delta", **where, "content_index": 0,
                   "delta": piece}  # fmt: skip
        yield {"type": "response.output_text.done", **where, "content_index": 0, "text": text}
        yield {"type": "response.content_part.done", **where, "content_index": 0,
               "part": item["content"][0]}  # fmt: skip
    else:
        yield {"type": "response.output_item.added", "output_index": index,
               "item": {**item, "status": "in_progress", "arguments": ""}}  # fmt: skip
        for piece in pieces(item["arguments"], slow):
            yield {"type": "response.function_call_arguments.delta", **where, "delta": piece}
        yield {"type": "response.function_call_arguments.done", **where,
               "arguments": item["arguments"]}  # fmt: skip
    yield {"type": "response.output_item.done", "output_index": index, "item": item}


def stream_events(step: Step, model: str, declared: tuple[str, ...]) -> Iterator[bytes]:
    """The events of one streamed response, in order, framed (each numbered)."""
    ident = f"resp_{uuid.uuid4().hex[:24]}"
    items = output_items(step, declared)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_body(ident, model, [], False)},
        {"type": "response.in_progress", "response": response_body(ident, model, [], False)},
    ]
    for index, item in enumerate(items):
        events.extend(_item_events(index, item, step))
    events.append({"type": "response.completed",
                   "response": response_body(ident, model, items, True)})  # fmt: skip
    for number, event in enumerate(events):
        yield sse(event["type"], {**event, "sequence_number": number})


def _route(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/")


class _ResponsesHandler(ScriptHandler):
    def get(self) -> None:
        self.note()
        if _route(self.path) in ("/v1/models", "/models"):
            models = [{"id": m, "object": "model", "owned_by": "writerpool"}
                      for m in self.provider.script.models]  # fmt: skip
            self.send_json(200, {"object": "list", "data": models})
        else:
            self.send_json(200, {})

    def post(self) -> None:
        if _route(self.path) not in ("/v1/responses", "/responses"):
            self.note()
            self.send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        request = self.read_json()
        if request is None:
            return
        self.note(request)
        items = request.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        if not isinstance(items, list):
            self.send_json(400, {"error": {"message": "input: a list is required",
                                           "type": "invalid_request_error"}})  # fmt: skip
            return
        model = str(request.get("model", ""))
        step = self.provider.script.step_at(*position(items))
        declared = tool_names(request)
        self.provider.record(model, self.headers.get("Authorization"))
        if request.get("stream"):
            events = list(stream_events(step, model, declared))
            self.send_events(events, step.delay_seconds / max(1, len(events) - 1))
        else:
            ident = f"resp_{uuid.uuid4().hex[:24]}"
            self.send_json(200, response_body(ident, model, output_items(step, declared), True))


class ScriptedResponses(ScriptedServer):
    """The OpenAI Responses provider: `start()`, `.port`, `stop()`, `base_url()` (the
    provider's base URL ends in /v1; Codex adds `/responses`)."""

    handler_class = _ResponsesHandler
    thread_name = "scripted-responses"
