"""The scripted provider over real HTTP: SSE framing, step selection, tool calls, CLI."""

from __future__ import annotations

import http.client
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from writerpool.agent.scripted import FINAL_TEXT, Script, ScriptedProvider, Step
from writerpool.proc import spawn

SCRIPT = {
    "scripts": [
        {"match": "greet", "steps": [{"text": "Hello there, this is the scripted answer."}]},
        {
            "match": "make",
            "steps": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi > f.txt"}}]},
                {"text": "made it"},
            ],
        },
        {"match": "echo", "steps": [{"text": "results: {tool_results}"}]},
        {"match": "slow", "steps": [{"text": "x" * 200, "delay_seconds": 0.4}]},
    ],
    "default": [{"text": "fallback"}],
}


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(Script.model_validate(SCRIPT), host="127.0.0.1") as server:
        yield server


def post(port: int, body: dict[str, Any]) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST", "/v1/chat/completions", json.dumps(body),
            {"Content-Type": "application/json", "Authorization": "Bearer k-1"},
        )  # fmt: skip
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read()
    finally:
        conn.close()


def sse_events(raw: bytes) -> list[str]:
    """The data payloads of an SSE body; asserts every event is a single data line."""
    assert raw.endswith(b"\n\n")
    events = raw[:-2].split(b"\n\n")
    payloads = []
    for event in events:
        assert event.startswith(b"data: ") and b"\n" not in event
        payloads.append(event[len(b"data: ") :].decode())
    return payloads


def stream(port: int, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    status, ctype, raw = post(port, {"model": "m-1", "stream": True, "messages": messages})
    assert status == 200 and ctype == "text/event-stream"
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def finish_of(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["choices"][0]["finish_reason"] for c in chunks
            if c["choices"] and c["choices"][0]["finish_reason"]]  # fmt: skip


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_text_answer_streams_as_chunks_then_usage_then_done(provider: ScriptedProvider) -> None:
    chunks = stream(provider.port, [{"role": "system", "content": "s"}, user("please greet")])
    assert text_of(chunks) == "Hello there, this is the scripted answer."
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m-1" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert finish_of(chunks) == ["stop"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) > 1


def test_tool_call_arguments_arrive_in_pieces_and_reassemble(provider: ScriptedProvider) -> None:
    chunks = stream(provider.port, [user("make a file")])
    calls = [
        tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    head = calls[0]
    assert head["function"]["name"] == "bash" and head["id"].startswith("call_")
    assert head["type"] == "function" and head["index"] == 0
    assert len(calls) > 2  # the arguments came incrementally
    arguments = "".join(tc["function"]["arguments"] for tc in calls)
    assert json.loads(arguments) == {"command": "echo hi > f.txt"}
    assert finish_of(chunks) == ["tool_calls"]


def test_step_is_the_number_of_assistant_messages_after_the_last_user_message(
    provider: ScriptedProvider,
) -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        ],
    }
    tool = {"role": "tool", "tool_call_id": "c1", "content": "(no output)"}
    second = stream(provider.port, [user("make a file"), call, tool])
    assert text_of(second) == "made it"
    past_end = stream(provider.port, [user("make a file"), call, tool, call, tool])
    assert text_of(past_end) == FINAL_TEXT
    # An earlier exchange does not count: only what follows the last user message.
    again = stream(provider.port, [user("make a file"), call, tool, user("make another")])
    assert finish_of(again) == ["tool_calls"]


def test_unmatched_message_plays_default_and_parts_are_matched(provider: ScriptedProvider) -> None:
    assert text_of(stream(provider.port, [user("anything else")])) == "fallback"
    parts = {"role": "user", "content": [{"type": "text", "text": "do greet me"}]}
    assert text_of(stream(provider.port, [parts])).startswith("Hello there")


def test_tool_results_placeholder_repeats_what_tools_returned() -> None:
    tool = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a.txt"}]}
    call = {"role": "assistant", "content": None}
    script = Script.model_validate(
        {
            "scripts": [
                {
                    "match": "echo",
                    "steps": [
                        {"tool_calls": [{"name": "find", "arguments": {}}]},
                        {"text": "results: {tool_results}"},
                    ],
                }
            ]
        }
    )
    assert script.step_for([user("echo"), call, tool]).text == "results: a.txt"


def test_counts_requests_and_keeps_last_model_and_authorization(
    provider: ScriptedProvider,
) -> None:
    before = provider.request_count
    status, _, raw = post(provider.port, {"model": "other-model", "messages": [user("greet")]})
    assert status == 200
    body = json.loads(raw)
    assert body["choices"][0]["message"]["content"].startswith("Hello")
    assert provider.request_count == before + 1
    assert provider.last_model == "other-model"
    assert provider.last_authorization == "Bearer k-1"


def test_slow_step_is_spread_over_many_small_chunks(provider: ScriptedProvider) -> None:
    chunks = stream(provider.port, [user("slow")])
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks
              if c["choices"] and c["choices"][0]["delta"].get("content")]  # fmt: skip
    assert "".join(pieces) == "x" * 200
    assert len(pieces) >= 10 and max(len(p) for p in pieces) <= 16


def test_models_listing_and_errors(provider: ScriptedProvider) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    conn.request("GET", "/v1/models")
    listing = json.loads(conn.getresponse().read())
    assert [m["id"] for m in listing["data"]] == ["scripted-model"]
    conn.close()
    status, _, _ = post(provider.port, {"model": "m", "messages": "not a list"})
    assert status == 400
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
    conn.request("GET", "/v2/elsewhere")
    assert conn.getresponse().status == 404
    conn.close()


def test_script_validation_rejects_ambiguous_steps() -> None:
    with pytest.raises(ValidationError):
        Step.model_validate({"text": "a", "tool_calls": [{"name": "bash"}]})
    with pytest.raises(ValidationError):
        Step.model_validate({})
    with pytest.raises(ValidationError):
        Script.model_validate({"scripts": [], "unknown": 1})


def test_stop_ends_a_slow_stream_and_frees_the_port() -> None:
    script = Script.model_validate({"default": [{"text": "y" * 100, "delay_seconds": 60}]})
    server = ScriptedProvider(script, host="127.0.0.1").start()
    port = server.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/chat/completions",
                 json.dumps({"model": "m", "stream": True, "messages": [user("x")]}))  # fmt: skip
    resp = conn.getresponse()
    assert resp.read(6) == b"data: "  # streaming has begun
    server.stop()
    server.stop()  # idempotent
    resp.read()  # the stream ended instead of running its 60 seconds
    conn.close()
    again = ScriptedProvider(script, host="127.0.0.1", port=port).start()
    assert again.port == port
    again.stop()


def test_cli_prints_its_port_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps(SCRIPT))
    proc = spawn(
        [sys.executable, "-m", "writerpool.agent.scripted", "--script", str(script_file),
         "--port", "0", "--host", "127.0.0.1"],
        stdin_pipe=False,
    )  # fmt: skip
    with proc:
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            chunks = stream(port, [user("greet")])
            assert text_of(chunks).startswith("Hello there")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_cli_refuses_an_invalid_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"default": [{"text": "a", "tool_calls": []}]}')
    proc = spawn([sys.executable, "-m", "writerpool.agent.scripted", "--script", str(bad)],
                 stdin_pipe=False)  # fmt: skip
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert b"invalid script" in err
