"""Hypothesis against a real `writerpool serve`: every tool's arguments through a real
MCP client session, and malformed JSON-RPC lines on its stdin.

Every tool call ends in {ok:true} or an error with a registered code that is never
internal_error; every line that carries a request id gets exactly one reply; a line that is not
JSON or is a batch gets an error even without one; and the server keeps answering."""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.conftest import MakeServer
from tests.e2e.harness import RawServer, connect
from writerpool.errors import CODES
from writerpool.sessions.contract.tools import TOOLS, TOOLS_BY_NAME

EXAMPLES = int(os.environ.get("WRITERPOOL_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# The configured workspaces: a valid start on one of them would launch pi; the fuzzer
# keeps to the refusal paths, which are the ones hostile clients reach.
CONFIGURED = {"demo", "hosted", "locked", "boxed"}

# No lone surrogates: they cannot be sent as UTF-8 at all, by any client.
CHARS = st.characters(blacklist_categories=["Cs"])
junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(CHARS, max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(CHARS, max_size=8),
                                                                   inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


def value_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values near the schema (matching it or just off it) and plain junk."""
    near: st.SearchStrategy[Any]
    if schema["type"] == "number":
        near = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10, 100)
    elif "pattern" in schema:
        near = st.from_regex(schema["pattern"], fullmatch=True).filter(
            lambda s: s not in CONFIGURED
        )
    else:
        near = st.text(CHARS, max_size=schema.get("maxLength", 64) + 2)
    return near | junk


def arguments_for(name: str) -> st.SearchStrategy[Any]:
    tool = TOOLS_BY_NAME[name]
    properties = tool.input_schema()["properties"]
    fields = {key: value_for(schema) for key, schema in properties.items()}
    shaped = st.fixed_dictionaries({}, optional=fields)
    extra = st.dictionaries(st.text(CHARS, max_size=10), junk, max_size=2)
    return shaped | st.builds(lambda a, b: {**a, **b}, shaped, extra) | junk


calls = st.sampled_from([t.name for t in TOOLS] + ["no_such_tool"]).flatmap(
    lambda name: st.tuples(st.just(name), arguments_for(name) if name in TOOLS_BY_NAME else junk)
)


def test_fuzzed_tool_arguments_never_break_the_server(make_server: MakeServer) -> None:
    server = make_server()
    counted: dict[str, int] = {}
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(connect(server)) as client,
    ):

        @FUZZ
        @given(call=calls)
        def one_call(call: tuple[str, Any]) -> None:
            name, arguments = call
            # The client's own schema check is bypassed with a dict of anything.
            args = arguments if isinstance(arguments, dict) else {"_": arguments}
            body = portal.call(client.call, name, args)
            code = "ok" if body["ok"] else body["error"]["code"]
            assert code == "ok" or (code in CODES and code != "internal_error"), (name, body)
            counted[code] = counted.get(code, 0) + 1

        one_call()
        listed = portal.call(client.ok, "pi_session_list")
        assert listed["sessions"] == []
    print(f"\nfuzzed tool calls: {sum(counted.values())} by outcome {sorted(counted.items())}")
    assert sum(counted.values()) >= min(EXAMPLES, 50)


_ids = itertools.count(1)
METHODS = st.sampled_from(["ping", "tools/list", "tools/call", "no/such", "notifications/x"])
TAIL = st.text(alphabet=st.sampled_from(list("{}[],:0123456789 abcnultrefs-")), max_size=20)


@st.composite
def line_with_id(draw: st.DrawFn) -> tuple[str, str]:
    """A request-shaped line with a unique string id: broken in some way, or not."""
    ident = f"fuzz-{next(_ids)}"
    kind = draw(st.sampled_from(["object", "broken_json"]))
    if kind == "broken_json":  # the JSON ends after the id: a parse error
        return ident, '{"jsonrpc": "2.0", "id": ' + json.dumps(ident) + ", " + draw(TAIL)
    message: dict[str, Any] = {"id": ident}
    if draw(st.booleans()):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0", 2, None]))
    if draw(st.integers(0, 4)):
        message["method"] = draw(METHODS | junk)
    if draw(st.booleans()):
        message["params"] = draw(
            junk | st.fixed_dictionaries({"name": st.sampled_from(["pi_session_list", "x"])})
        )
    extra = draw(st.dictionaries(st.sampled_from(["x", "meta", "_"]), junk, max_size=2))
    return ident, json.dumps({**extra, **message})


lines_without_id = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r"),
        max_size=40,
    ),
    junk.map(json.dumps).filter(lambda s: '"id"' not in s),
    st.just('{"jsonrpc": "2.0", "method": "notifications/bogus"}'),
)


def _frames_until(raw: RawServer, ident: object, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        frame = raw._next_frame(deadline)
        seen.append(frame)
        if frame.get("id") == ident:
            return seen


@pytest.fixture
def raw(make_server: MakeServer) -> Any:
    server = RawServer(make_server())
    try:
        server.initialize()
        yield server
    finally:
        server.close()


def test_every_malformed_line_with_an_id_gets_one_reply(raw: RawServer) -> None:
    assert raw.proc.stdin is not None
    replied: dict[object, int] = {}
    sent = {"with_id": 0, "without_id": 0}
    pings = itertools.count(1_000_000)

    def write(line: str) -> None:
        assert raw.proc.stdin is not None
        raw.proc.stdin.write(line.encode() + b"\n")
        raw.proc.stdin.flush()

    def note(frames: list[dict[str, Any]]) -> None:
        for frame in frames:
            replied[frame.get("id")] = replied.get(frame.get("id"), 0) + 1

    @FUZZ
    @given(case=st.one_of(line_with_id(), lines_without_id.map(lambda s: (None, s))))
    def one_line(case: tuple[str | None, str]) -> None:
        ident, line = case
        write(line)
        if ident is not None:
            sent["with_id"] += 1
            frames = _frames_until(raw, ident)
            note(frames)
            assert "error" in frames[-1] or "result" in frames[-1], frames[-1]
        else:
            sent["without_id"] += 1
            ping = next(pings)
            write(json.dumps({"jsonrpc": "2.0", "id": ping, "method": "ping"}))
            note(_frames_until(raw, ping))

    one_line()
    assert raw.proc.poll() is None, "the server died"
    fuzzed = {k: v for k, v in replied.items() if isinstance(k, str) and k.startswith("fuzz-")}
    assert all(count == 1 for count in fuzzed.values()), "a line got more than one reply"
    print(f"\nmalformed lines: {sent['with_id']} with an id (each answered once), "
          f"{sent['without_id']} without")  # fmt: skip


def _write(raw: RawServer, line: bytes) -> None:
    assert raw.proc.stdin is not None
    raw.proc.stdin.write(line + b"\n")
    raw.proc.stdin.flush()


def test_a_line_that_is_not_json_gets_a_parse_error_with_id_null(raw: RawServer) -> None:
    _write(raw, b"this is not json")
    frame = raw._next_frame(time.monotonic() + 20)
    assert frame["id"] is None and frame["error"]["code"] == -32700, frame
    _write(raw, b'{"jsonrpc": "2.0", "id": 7, "method": "ping", ')  # the id is still read
    frame = raw._next_frame(time.monotonic() + 20)
    assert frame["id"] == 7 and frame["error"]["code"] == -32700, frame
    assert raw.request("ping", {}) == {}


def test_an_id_escaping_a_lone_surrogate_gets_a_reply_with_id_null(raw: RawServer) -> None:
    """JSON can escape what UTF-8 cannot carry; the reply must still be sendable (its
    failure ended the server), in a request, a batch and a line that breaks off."""
    for line in (rb'{"jsonrpc": "2.0", "id": "\ud800", "method": "ping"}',
                 rb'[{"jsonrpc": "2.0", "id": "a\udfff", "method": "ping"}]',
                 rb'{"jsonrpc": "2.0", "id": "\ud800", "method": "ping", '):  # fmt: skip
        _write(raw, line)
        frame = raw._next_frame(time.monotonic() + 20)
        assert frame["id"] is None and frame["error"]["code"] in (-32600, -32700), frame
        assert raw.request("ping", {}) == {}
    assert raw.proc.poll() is None, "the server died"


def test_a_batch_is_refused_with_an_error(raw: RawServer) -> None:
    ping = {"jsonrpc": "2.0", "method": "ping"}
    _write(raw, json.dumps([{**ping, "id": "b-1"}, {**ping, "id": "b-2"}, ping]).encode())
    frames = [raw._next_frame(time.monotonic() + 20) for _ in range(2)]
    assert [frame["id"] for frame in frames] == ["b-1", "b-2"]
    assert {frame["error"]["code"] for frame in frames} == {-32600}
    assert "batch" in frames[0]["error"]["message"]
    for batch in ([], [ping]):  # nothing in it to answer by id: one error with id null
        _write(raw, json.dumps(batch).encode())
        frame = raw._next_frame(time.monotonic() + 20)
        assert frame["id"] is None and frame["error"]["code"] == -32600, frame
    assert raw.request("ping", {}) == {}
