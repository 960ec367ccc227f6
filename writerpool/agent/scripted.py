"""A scripted OpenAI-compatible provider: plays fixed answers so pi runs offline.
(Its siblings speak Anthropic Messages and OpenAI Responses; `main` serves any of them.)

It serves `POST /v1/chat/completions` (streamed as Server-Sent Events, the way pi's
openai-completions client reads them) and `GET /v1/models`. Which answer is played is
decided from the request alone, so any number of pi processes can share one server:
the script entry is the first whose `match` occurs in the last user message, and the
step is the number of assistant messages after that user message.

Request bodies are never logged; only a count and the last model name are kept.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from writerpool.agent.scripted_messages import ScriptedMessages
from writerpool.agent.scripted_responses import ScriptedResponses
from writerpool.agent.scripted_script import (
    FINAL_TEXT,
    TOOL_RESULTS,
    Script,
    ScriptEntry,
    Step,
    ToolCall,
    pieces,
)
from writerpool.agent.scripted_server import ScriptedServer, ScriptHandler, sse

__all__ = [
    "FINAL_TEXT", "TOOL_RESULTS", "Script", "ScriptEntry", "ScriptedProvider", "Step",
    "ToolCall",
]  # fmt: skip


def stream_chunks(step: Step, model: str) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of one streamed answer, in order."""
    ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    base = {"id": ident, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}  # fmt: skip

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    slow = step.delay_seconds > 0
    if step.tool_calls is not None:
        for index, call in enumerate(step.tool_calls):
            head = {"index": index, "id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
                    "function": {"name": call.name, "arguments": ""}}  # fmt: skip
            yield chunk({"role": "assistant", "tool_calls": [head]})
            for piece in pieces(json.dumps(call.arguments), slow):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls")
    else:
        text = step.text or ""
        for i, piece in enumerate(pieces(text, slow, step.chunk_chars)):
            yield chunk({"role": "assistant", "content": piece} if i == 0 else {"content": piece})
        yield chunk({}, "stop")
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    yield {**base, "choices": [], "usage": usage}


def completion_body(step: Step, model: str) -> dict[str, Any]:
    """A non-streamed answer, for clients that do not ask for a stream."""
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    finish = "stop"
    if step.tool_calls is not None:
        message["tool_calls"] = [
            {"id": f"call_{uuid.uuid4().hex[:16]}", "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in step.tool_calls
        ]  # fmt: skip
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion",
        "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }  # fmt: skip


class _ChatHandler(ScriptHandler):
    def get(self) -> None:
        self.note()
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            models = [{"id": m, "object": "model", "owned_by": "writerpool"}
                      for m in self.provider.script.models]  # fmt: skip
            self.send_json(200, {"object": "list", "data": models})
        else:
            self.send_json(404, {"error": {"message": "not found"}})

    def post(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self.note()
            self.send_json(404, {"error": {"message": "not found"}})
            return
        request = self.read_json()
        if request is None:
            return
        self.note(request)
        messages = request.get("messages")
        if not isinstance(messages, list):
            self.send_json(400, {"error": {"message": "malformed chat completion request"}})
            return
        model = str(request.get("model", ""))
        step = self.provider.script.step_for(messages)
        self.provider.record(model, self.headers.get("Authorization"))
        if request.get("stream"):
            chunks = [sse(None, c) for c in stream_chunks(step, model)]
            self.send_events([*chunks, sse(None, "[DONE]")], _pause(step, len(chunks)))
        else:
            self.send_json(200, completion_body(step, model))


def _pause(step: Step, events: int) -> float:
    """The wait between a slow step's events: its delay spread over the stream."""
    return step.delay_seconds / max(1, events - 1)


class ScriptedProvider(ScriptedServer):
    """The chat-completions provider: `start()`, `.port`, `stop()`."""

    handler_class = _ChatHandler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m writerpool.agent.scripted",
        description="Serve a scripted provider until SIGTERM: chat completions (pi), "
        "Anthropic Messages (Claude Code) or OpenAI Responses (Codex).",
    )
    parser.add_argument("--script", type=Path, required=True, help="script JSON file")
    parser.add_argument("--api", choices=sorted(_SERVERS), default="chat", help="the wire")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--unix-socket", type=Path, help="listen on this socket instead")
    args = parser.parse_args(argv)
    try:
        script = Script.load(args.script)
    except (OSError, ValidationError) as exc:
        print(f"scripted provider: invalid script: {exc}", file=sys.stderr)
        return 2
    server = _SERVERS[args.api](script, host=args.host, port=args.port,
                                unix_socket=args.unix_socket).start()  # fmt: skip
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print(args.unix_socket or server.port, flush=True)
    while not done.wait(0.5):
        pass
    server.stop()
    return 0


_SERVERS: dict[str, type[ScriptedServer]] = {
    "chat": ScriptedProvider, "messages": ScriptedMessages, "responses": ScriptedResponses,
}  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
