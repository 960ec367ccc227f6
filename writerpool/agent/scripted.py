"""A scripted OpenAI-compatible provider: plays fixed answers so pi runs offline.

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
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

FINAL_TEXT = "done"
TOOL_RESULTS = "{tool_results}"
CHUNK_CHARS = 16  # fast steps: pieces of this size
SLOW_CHUNKS = 20  # slow steps: spread over this many pieces at least
MAX_BODY = 32 * 1024 * 1024
# The headers a key can arrive in; the last request's values are kept for tests.
AUTH_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCall(_Strict):
    name: str = Field(min_length=1, max_length=64)
    arguments: dict[str, JsonValue] = {}


class Step(_Strict):
    """One assistant answer: text, or tool calls (pi runs them and asks again)."""

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

    def step_for(self, messages: list[Any]) -> Step:
        """The step to play for a request's messages (stateless: derived from them).

        A text step may hold `{tool_results}`: it is replaced by the tool results
        since the last user message, so a test can see what pi's tools returned.
        """
        user_text, answered, results = _position(messages)
        steps = self.steps_for(user_text)
        if answered >= len(steps):
            return Step(text=FINAL_TEXT)
        step = steps[answered]
        if step.text is not None and TOOL_RESULTS in step.text:
            return step.model_copy(update={"text": step.text.replace(TOOL_RESULTS, results)})
        return step


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _position(messages: list[Any]) -> tuple[str, int, str]:
    """The last user message's text, how many assistant messages follow it, and the
    text of the tool results that follow it."""
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


def _pieces(text: str, slow: bool, chunk_chars: int | None = None) -> list[str]:
    if not text:
        return [""]
    size = max(1, len(text) // SLOW_CHUNKS) if slow else CHUNK_CHARS
    size = chunk_chars or min(size, CHUNK_CHARS)
    return [text[i : i + size] for i in range(0, len(text), size)]


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
            for piece in _pieces(json.dumps(call.arguments), slow):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls")
    else:
        text = step.text or ""
        for i, piece in enumerate(_pieces(text, slow, step.chunk_chars)):
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


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: request lines are not worth a log, and bodies must never reach one."""

    def _send_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.provider.note_request(self.path, self.headers)
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            models = [{"id": m, "object": "model", "owned_by": "writerpool"}
                      for m in self.server.provider.script.models]  # fmt: skip
            self._send_json(200, {"object": "list", "data": models})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        self.server.provider.note_request(self.path, self.headers)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, {"error": {"message": "not found"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            self._send_json(400, {"error": {"message": "a JSON body is required"}})
            return
        try:
            raw = self.rfile.read(length)
            self.server.provider.look_for_markers(raw)
            request = json.loads(raw)
            messages = request["messages"]
            model = str(request.get("model", ""))
            if not isinstance(messages, list):
                raise TypeError("messages")
        except (ValueError, KeyError, TypeError):
            self._send_json(400, {"error": {"message": "malformed chat completion request"}})
            return
        provider = self.server.provider
        step = provider.script.step_for(messages)
        provider.record(model, self.headers.get("Authorization"))
        if request.get("stream"):
            self._stream(step, model)
        else:
            self._send_json(200, completion_body(step, model))

    def _stream(self, step: Step, model: str) -> None:
        chunks = list(stream_chunks(step, model))
        pause = step.delay_seconds / max(1, len(chunks) - 1)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # No length is known ahead; the stream ends when the connection closes.
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for i, item in enumerate(chunks):
                if i and pause and self.server.provider.stopping.wait(pause):
                    return
                self.wfile.write(b"data: " + json.dumps(item).encode() + b"\n\n")
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up (an aborted turn); nothing to clean up


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    provider: ScriptedProvider


class ScriptedProvider:
    """The server, run on a background thread: `start()`, `.port`, `stop()`."""

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",  # writers reach it through their session's proxy
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.script = script
        self.tls = tls
        self.host = host
        self._requested_port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.request_count = 0
        self.last_model: str | None = None
        self.last_authorization: str | None = None
        self.last_auth: dict[str, str] = {}
        self.last_path: str | None = None
        # Strings a test watches for anywhere in a request (a planted system prompt);
        # only whether each was seen is kept, never the body.
        self.markers: set[str] = set()
        self.seen_markers: set[str] = set()

    def look_for_markers(self, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        found = {m for m in self.markers if m in text}
        if found:
            with self._lock:
                self.seen_markers |= found

    def note_request(self, path: str, headers: Any) -> None:
        """Keep the request's path (with its query) and the headers a key can be in."""
        auth = {name: str(headers[name]) for name in AUTH_HEADERS if headers.get(name)}
        with self._lock:
            self.last_path = path
            self.last_auth = auth

    def record(self, model: str, authorization: str | None) -> None:
        with self._lock:
            self.request_count += 1
            self.last_model = model
            self.last_authorization = authorization

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the scripted provider is not started")
        return int(self._server.server_address[1])

    def base_url(self, host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{host}:{self.port}/v1"

    def start(self) -> ScriptedProvider:
        if self._server is not None:
            return self
        self.stopping.clear()
        server = _Server((self.host, self._requested_port), _Handler)
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        server.provider = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="scripted-provider", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping.set()  # ends slow streams promptly
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ScriptedProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m writerpool.agent.scripted",
        description="Serve a scripted OpenAI-compatible provider until SIGTERM.",
    )
    parser.add_argument("--script", type=Path, required=True, help="script JSON file")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    args = parser.parse_args(argv)
    try:
        script = Script.load(args.script)
    except (OSError, ValidationError) as exc:
        print(f"scripted provider: invalid script: {exc}", file=sys.stderr)
        return 2
    provider = ScriptedProvider(script, host=args.host, port=args.port).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print(provider.port, flush=True)
    while not done.wait(0.5):
        pass
    provider.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
