"""Scripted stand-ins for the model APIs the coding clients call, on loopback only:
an Anthropic Messages API (Claude Code) and an OpenAI Responses API (Codex).

Both play the same driver: a coding client's model that uses writerpool's tools in
order (start a coding session, prompt it, wait for the turn with progress, read the
result, close the session), deciding each step from the tool results the client sent
back. Every request body is kept, so a test can read exactly what the client showed
its model (the measure of how much of a tool result a client passes on whole).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINAL_TEXT = "All done: the writer holds the change."
# The user prompt of a driven run says this; side requests of a client do not.
WRITERPOOL_MENTION = "writerpool"
DRIVEN_TOOLS = ("pi_session_start", "pi_session_prompt", "pi_turn_get", "pi_session_close")


@dataclass(frozen=True)
class Action:
    """The model's next move: call a tool (by its short writerpool name) or answer."""

    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str | None = None


Driver = Callable[[list[dict[str, Any]]], Action]


def writerpool_bodies(texts: list[str]) -> list[dict[str, Any]]:
    """The tool results that are writerpool bodies (other tools' results left out)."""
    bodies = [parse_result(text) for text in texts]
    return [b for b in bodies if b is not None and "ok" in b]


def drive(driver: Driver, texts: list[str]) -> Action:
    """The driver's next move; a client's own refusal of a writerpool call (no body
    came back) ends the run with that message instead of asking again."""
    bodies = writerpool_bodies(texts)
    if bodies and texts and (parse_result(texts[-1]) or {}).get("ok") is None:
        return Action(text="the client refused a call: " + texts[-1][-300:])
    return driver(bodies)


def parse_result(text: str) -> dict[str, Any] | None:
    """A tool result as the client passed it on: writerpool's JSON body, if it is one."""
    try:
        body = json.loads(text)
    except ValueError:
        start = text.find("{")
        if start < 0:
            return None
        try:
            body = json.loads(text[start:])
        except ValueError:
            return None
    return body if isinstance(body, dict) else None


@dataclass
class SessionDriver:
    """start → prompt → turn_get (until the turn ends) → close → answer."""

    workspace: str
    prompt: str
    profile: str = "code"
    wait_seconds: int = 60
    seen: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, results: list[dict[str, Any]]) -> Action:
        self.seen = results
        if not results:
            return Action(
                "pi_session_start", {"workspace": self.workspace, "executionProfile": self.profile}
            )
        last = results[-1]
        if not last.get("ok"):
            return Action(text=f"writerpool refused: {last.get('error', {}).get('code')}")
        session_id = _find(results, "session", "sessionId") or last.get("sessionId")
        if "session" in last and len(results) == 1:
            return Action("pi_session_prompt", {"sessionId": session_id, "message": self.prompt})
        if "turnId" in last and "turn" not in last and "aborted" not in last:
            return self._wait(session_id, last["turnId"])
        if "turn" in last:
            if last["turn"]["status"] == "running":
                return self._wait(session_id, last["turn"]["turnId"])
            return Action("pi_session_close", {"sessionId": session_id})
        return Action(text=FINAL_TEXT)

    def _wait(self, session_id: str | None, turn_id: str) -> Action:
        return Action(
            "pi_turn_get",
            {"sessionId": session_id, "turnId": turn_id, "waitSeconds": self.wait_seconds},
        )


def _find(results: list[dict[str, Any]], outer: str, key: str) -> str | None:
    for body in results:
        inner = body.get(outer)
        if isinstance(inner, dict) and isinstance(inner.get(key), str):
            return str(inner[key])
    return None


def tool_name(tools: list[dict[str, Any]], short: str) -> str:
    """The client's own name for writerpool's tool (`mcp__writerpool__pi_…`, say)."""
    names = [str(t.get("name", "")) for t in tools]
    for name in names:
        if name == short or name.endswith("__" + short) or name.endswith("." + short):
            return name
    raise AssertionError(f"the client offered no {short} tool (tools: {names})")


# -- HTTP plumbing -------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _body(self) -> dict[str, Any]:
        size = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(size) if size else b"{}"
        if self.headers.get("Content-Encoding") == "zstd":
            raise AssertionError("compressed request bodies are not supported")
        body = json.loads(raw or b"{}")
        return body if isinstance(body, dict) else {}

    def send_json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        self.server.owner.requests.append({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [], "models": []})
        else:
            self.send_json(404, {"error": {"message": "not here"}})

    def do_POST(self) -> None:
        body = self._body()
        owner = self.server.owner
        with owner.lock:
            owner.requests.append({"method": "POST", "path": self.path, "body": body})
        owner.handle(self, self.path, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: StandIn


class StandIn:
    """One loopback HTTP server; subclasses answer in one API's wire format."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def handle(self, handler: _Handler, path: str, body: dict[str, Any]) -> None:
        raise NotImplementedError

    def tool_results(self) -> list[str]:
        """Every writerpool tool result text the client showed its model, in order."""
        raise NotImplementedError


# -- Anthropic Messages (Claude Code) ------------------------------------------------


def _anthropic_results(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(str(c.get("text", "")) for c in inner if isinstance(c, dict))
                out.append(str(inner or ""))
    return out


class AnthropicStandIn(StandIn):
    """POST /v1/messages, streamed as Claude Code reads it (message_start, content
    blocks, message_delta, message_stop). Side requests (titles, quota checks, token
    counts) that carry no writerpool tools get a short text answer."""

    def handle(self, handler: _Handler, path: str, body: dict[str, Any]) -> None:
        if "count_tokens" in path:
            handler.send_json(200, {"input_tokens": 10})
            return
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        names = {str(t.get("name")) for t in tools}
        if any("pi_session_start" in name for name in names):
            action = drive(self.driver, _anthropic_results(body["messages"]))
        elif "ToolSearch" in names and WRITERPOOL_MENTION in json.dumps(body["messages"]):
            # Claude Code defers MCP tools: a model loads them by name first.
            query = "select:" + ",".join(f"mcp__writerpool__{t}" for t in DRIVEN_TOOLS)
            action = Action("ToolSearch", {"query": query, "max_results": len(DRIVEN_TOOLS)})
        else:
            action = Action(text="ok")  # a side request (a title, a summary)
        block = self._block(action, tools)
        stop = "tool_use" if action.tool else "end_turn"
        message = {
            "id": "msg_" + uuid.uuid4().hex[:12], "type": "message", "role": "assistant",
            "model": body.get("model", "stand-in"), "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1},
        }  # fmt: skip
        if not body.get("stream"):
            handler.send_json(200, {**message, "content": [block], "stop_reason": stop})
            return
        handler.send_events(self._events(message, block, stop))

    def _block(self, action: Action, tools: list[dict[str, Any]]) -> dict[str, Any]:
        if action.tool is None:
            return {"type": "text", "text": action.text or ""}
        name = action.tool if action.tool == "ToolSearch" else tool_name(tools, action.tool)
        return {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": name,
                "input": action.arguments}  # fmt: skip

    def _events(
        self, message: dict[str, Any], block: dict[str, Any], stop: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        yield "message_start", {"type": "message_start", "message": message}
        start: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": start}  # fmt: skip
        yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 5}}  # fmt: skip
        yield "message_stop", {"type": "message_stop"}

    def tool_results(self) -> list[str]:
        longest: list[str] = []
        for request in self.requests:
            messages = (request.get("body") or {}).get("messages")
            if isinstance(messages, list):
                found = _anthropic_results(messages)
                longest = found if len(found) > len(longest) else longest
        return longest


# -- OpenAI Responses (Codex) --------------------------------------------------------


def _responses_results(items: list[Any]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            if isinstance(output, list):
                output = "".join(str(c.get("text", "")) for c in output if isinstance(c, dict))
            elif isinstance(output, dict):
                output = str(output.get("content", ""))
            out.append(str(output or ""))
    return out


def _responses_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Function tools, including those nested in namespaces."""
    out: list[dict[str, Any]] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("tools"), list):
            prefix = str(tool.get("name", ""))
            out += [{**t, "name": t.get("name"), "namespace": prefix} for t in tool["tools"]]
        else:
            out.append(tool)
    return out


class ResponsesStandIn(StandIn):
    """POST /v1/responses, streamed as Codex reads it (response.created,
    response.output_item.done, response.completed)."""

    def handle(self, handler: _Handler, path: str, body: dict[str, Any]) -> None:
        if not path.rstrip("/").endswith("/responses"):
            handler.send_json(404, {"error": {"message": "not here"}})
            return
        tools = _responses_tools(body)
        if not any("pi_session_start" in str(t.get("name")) for t in tools):
            action = Action(text="ok")
        else:
            action = drive(self.driver, _responses_results(body.get("input") or []))
        handler.send_events(self._events(action, tools))

    def _item(self, action: Action, tools: list[dict[str, Any]]) -> dict[str, Any]:
        if action.tool is None:
            return {"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex[:8],
                    "status": "completed",
                    "content": [{"type": "output_text", "text": action.text or "",
                                 "annotations": []}]}  # fmt: skip
        tool = next(t for t in tools if t["name"] == tool_name(tools, action.tool))
        item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:8],
                "call_id": "call_" + uuid.uuid4().hex[:8], "name": tool["name"],
                "arguments": json.dumps(action.arguments), "status": "completed"}  # fmt: skip
        if tool.get("namespace"):
            item["namespace"] = tool["namespace"]
        return item

    def _events(
        self, action: Action, tools: list[dict[str, Any]]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        rid = "resp_" + uuid.uuid4().hex[:12]
        item = self._item(action, tools)
        created = {"id": rid, "status": "in_progress", "output": []}
        yield "response.created", {"type": "response.created", "response": created}
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "output_index": 0, "item": item}  # fmt: skip
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "output_index": 0, "item": item}  # fmt: skip
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 15}  # fmt: skip
        yield "response.completed", {"type": "response.completed",
                                     "response": {"id": rid, "status": "completed",
                                                  "output": [item], "usage": usage}}  # fmt: skip

    def tool_results(self) -> list[str]:
        longest: list[str] = []
        for request in self.requests:
            items = (request.get("body") or {}).get("input")
            if isinstance(items, list):
                found = _responses_results(items)
                longest = found if len(found) > len(longest) else longest
        return longest
