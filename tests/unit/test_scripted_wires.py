"""The Anthropic Messages and OpenAI Responses scripted providers over real HTTP: their
event streams, the portable shell call turned into each agent's shell tool, step choice
from each wire's history, probes, and the record of what a client sent."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from writerpool.agent.scripted_messages import ScriptedMessages
from writerpool.agent.scripted_responses import ScriptedResponses
from writerpool.agent.scripted_script import FINAL_TEXT, Script

SCRIPT = Script.model_validate(
    {
        "scripts": [
            {"match": "greet", "steps": [{"text": "Hello there, this is the scripted answer."}]},
            {
                "match": "make",
                "steps": [
                    {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > f"}}]},
                    {"text": "made it: {tool_results}"},
                ],
            },
        ],
        "default": [{"text": "fallback"}],
    }
)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("127.0.0.1", timeout=30)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self.path))


def request(
    conn: http.client.HTTPConnection, method: str, path: str, body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str, bytes]:  # fmt: skip
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read()
    finally:
        conn.close()


def events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each Server-Sent Event; each has both lines."""
    out = []
    for frame in raw.decode().split("\n\n"):
        if not frame:
            continue
        head, data = frame.split("\n")
        assert head.startswith("event: ") and data.startswith("data: ")
        out.append((head[len("event: ") :], json.loads(data[len("data: ") :])))
    return out


@pytest.fixture(scope="module")
def messages() -> Iterator[ScriptedMessages]:
    with ScriptedMessages(SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def responses() -> Iterator[ScriptedResponses]:
    with ScriptedResponses(SCRIPT) as server:
        yield server


BASH_TOOL = {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}


def anthropic(server: ScriptedMessages, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = {"model": "claude-x", "max_tokens": 100, "stream": True, **body}
    headers = {"x-api-key": "sess-key", "anthropic-version": "2023-06-01"}
    status, ctype, raw = request(conn, "POST", "/v1/messages?beta=true", body, headers)
    assert status == 200 and ctype == "text/event-stream"
    return events(raw)


def test_messages_text_streams_in_anthropic_order(messages: ScriptedMessages) -> None:
    got = anthropic(messages, {"messages": [{"role": "user", "content": "greet me"}],
                               "tools": [BASH_TOOL]})  # fmt: skip
    names = [name for name, _ in got]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in got)
    text = "".join(d["delta"]["text"] for n, d in got if n == "content_block_delta")
    assert text == "Hello there, this is the scripted answer."
    assert len([n for n in names if n == "content_block_delta"]) > 1
    delta = next(d for n, d in got if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] > 0


def test_messages_bash_becomes_claude_codes_bash_tool_then_sees_its_result(
    messages: ScriptedMessages,
) -> None:
    first = [{"role": "user", "content": [{"type": "text", "text": "please make f"}]}]
    got = anthropic(messages, {"messages": first, "tools": [BASH_TOOL]})
    start = next(d for n, d in got if n == "content_block_start")["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Bash" and start["input"] == {}
    partial = "".join(d["delta"]["partial_json"] for n, d in got if n == "content_block_delta")
    assert json.loads(partial)["command"] == "echo hi > f"
    assert next(d for n, d in got if n == "message_delta")["delta"]["stop_reason"] == "tool_use"
    result = {"type": "tool_result", "tool_use_id": start["id"],
              "content": [{"type": "text", "text": "ok-7"}]}  # fmt: skip
    history = [*first,
               {"role": "assistant", "content": [{**start, "input": json.loads(partial)}]},
               {"role": "user", "content": [result]}]  # fmt: skip
    second = anthropic(messages, {"messages": history, "tools": [BASH_TOOL]})
    text = "".join(d["delta"]["text"] for n, d in second if n == "content_block_delta")
    assert text == "made it: ok-7"
    last = anthropic(messages, {"messages": [*history, {"role": "assistant", "content": "x"}],
                                "tools": [BASH_TOOL]})  # fmt: skip
    assert "".join(d["delta"].get("text", "") for n, d in last if n == "content_block_delta") == (
        FINAL_TEXT
    )


def test_messages_pass_over_claude_codes_system_message_after_the_prompt(
    messages: ScriptedMessages,
) -> None:
    # Claude Code 2.1.332 sends its environment as a `system` message after the prompt.
    environment = {"role": "system", "content": [{"type": "text", "text": "# Environment"}]}
    first = [{"role": "user", "content": [{"type": "text", "text": "please make f"}]},
             environment]  # fmt: skip
    got = anthropic(messages, {"messages": first, "tools": [BASH_TOOL]})
    start = next(d for n, d in got if n == "content_block_start")["content_block"]
    assert start["type"] == "tool_use" and start["name"] == "Bash"


def test_messages_without_tools_get_text_and_non_streaming_gets_one_message(
    messages: ScriptedMessages,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", messages.port, timeout=30)
    title = {"model": "m", "messages": [{"role": "user", "content": "make a title"}]}
    status, _, raw = request(conn, "POST", "/v1/messages", title)
    body = json.loads(raw)
    assert status == 200 and body["type"] == "message" and body["stop_reason"] == "end_turn"
    assert body["content"] == [{"type": "text", "text": FINAL_TEXT}]


def test_messages_probes_count_tokens_and_records_what_was_sent(
    messages: ScriptedMessages,
) -> None:
    port = messages.port
    assert request(http.client.HTTPConnection("127.0.0.1", port), "HEAD", "/")[0] == 200
    status, _, raw = request(http.client.HTTPConnection("127.0.0.1", port), "GET", "/v1/models")
    assert status == 200 and json.loads(raw)["data"][0]["id"] == "scripted-model"
    count = {"model": "m", "messages": []}
    conn = http.client.HTTPConnection("127.0.0.1", port)
    status, _, raw = request(conn, "POST", "/v1/messages/count_tokens", count)
    assert status == 200 and json.loads(raw) == {"input_tokens": 10}
    assert request(http.client.HTTPConnection("127.0.0.1", port), "POST", "/v1/other", {})[0] == 404
    bad = request(http.client.HTTPConnection("127.0.0.1", port), "POST", "/v1/messages", [1])
    assert bad[0] == 400
    anthropic(messages, {"messages": [{"role": "user", "content": "greet"}],
                         "tools": [BASH_TOOL]})  # fmt: skip
    sent = messages.recorded("/v1/messages?")[-1]
    assert sent.method == "POST" and sent.model == "claude-x" and sent.stream
    assert sent.tools == ("Bash",) and sent.headers["x-api-key"] == "sess-key"
    assert messages.last_auth == {"x-api-key": "sess-key"}
    assert messages.last_authorization == "sess-key" and messages.last_model == "claude-x"


SHELLS = [
    ({"type": "function", "name": "exec_command"}, "exec_command", {"cmd": "echo hi > f"}),
    ({"type": "function", "name": "shell_command"}, "shell_command", {"command": "echo hi > f"}),
    ({"type": "function", "name": "shell"}, "shell",
     {"command": ["bash", "-lc", "echo hi > f"]}),
]  # fmt: skip


def openai(server: ScriptedResponses, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    conn = _UnixConnection(server.unix_socket) if server.unix_socket else (
        http.client.HTTPConnection("127.0.0.1", server.port, timeout=30))  # fmt: skip
    status, ctype, raw = request(conn, "POST", "/v1/responses",
                                 {"model": "gpt-x", "stream": True, **body},
                                 {"Authorization": "Bearer sess-key"})  # fmt: skip
    assert status == 200 and ctype == "text/event-stream"
    got = events(raw)
    assert [d["sequence_number"] for _, d in got] == list(range(len(got)))
    assert all(name == data["type"] for name, data in got)
    return got


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_responses_text_streams_created_deltas_completed(responses: ScriptedResponses) -> None:
    got = openai(responses, {"input": [user("<environment_context/>"), user("greet")]})
    names = [n for n, _ in got]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    assert "response.output_item.added" in names and "response.output_item.done" in names
    text = "".join(d["delta"] for n, d in got if n == "response.output_text.delta")
    assert text == "Hello there, this is the scripted answer."
    done = got[-1][1]["response"]
    assert done["status"] == "completed" and done["usage"]["total_tokens"] > 0
    assert done["output"][0]["content"][0]["text"] == text


@pytest.mark.parametrize(("tool", "name", "arguments"), SHELLS)
def test_responses_bash_becomes_the_declared_shell_tool(
    responses: ScriptedResponses, tool: dict[str, Any], name: str, arguments: dict[str, Any]
) -> None:
    got = openai(responses, {"input": [user("make f")], "tools": [tool]})
    added = next(d for n, d in got if n == "response.output_item.added")["item"]
    assert added["type"] == "function_call" and added["name"] == name
    pieces = "".join(d["delta"] for n, d in got if n == "response.function_call_arguments.delta")
    assert json.loads(pieces) == arguments
    item = next(d for n, d in got if n == "response.output_item.done")["item"]
    assert item["call_id"] == added["call_id"] and json.loads(item["arguments"]) == arguments


def test_responses_counts_answers_as_runs_of_output_items(responses: ScriptedResponses) -> None:
    history = [user("make f"), {"type": "reasoning", "summary": []},
               {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
               {"type": "function_call_output", "call_id": "c1", "output": "ok-9"}]  # fmt: skip
    got = openai(responses, {"input": history, "tools": [SHELLS[0][0]]})
    text = "".join(d["delta"] for n, d in got if n == "response.output_text.delta")
    assert text == "made it: ok-9"
    resumed = [*history, {"type": "message", "role": "assistant", "content": "made it"},
               user("greet again")]  # fmt: skip
    again = openai(responses, {"input": resumed})
    assert "".join(d["delta"] for n, d in again if n == "response.output_text.delta").startswith(
        "Hello there"
    )


def test_responses_on_a_unix_socket_records_the_key_header(tmp_path: Path) -> None:
    with ScriptedResponses(SCRIPT, unix_socket=tmp_path / "p.sock") as server:
        openai(server, {"input": [user("greet")], "tools": [SHELLS[0][0]]})
        status, _, raw = request(_UnixConnection(tmp_path / "p.sock"), "GET", "/v1/models")
        assert status == 200 and json.loads(raw)["data"][0]["id"] == "scripted-model"
        sent = server.recorded("/v1/responses")
        assert len(sent) == 1 and sent[0].tools == ("exec_command",) and sent[0].stream
        assert sent[0].headers["authorization"] == "Bearer sess-key"
        assert server.last_auth == {}  # the last request (the listing) carried no key
        with pytest.raises(RuntimeError):
            _ = server.port
    assert not (tmp_path / "p.sock").exists()
