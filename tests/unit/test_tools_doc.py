"""docs/tools.md's examples follow the tool contract (writerpool/sessions/contract/):
every fence is closed and names its language, every JSON example parses, every call
example names a tool and passes the server's own argument check, and every answer
example holds only what the tool's output schema declares, with the declared types."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from writerpool.errors import WriterpoolError
from writerpool.sessions.contract.tools import TOOLS, TOOLS_BY_NAME

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
TOOL_NAME = re.compile(r"`(pi_[a-z_]+)`")
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "integer": (int,), "number": (int, float), "null": (type(None),),
}  # fmt: skip


@dataclass(frozen=True)
class Block:
    line: int
    language: str
    text: str
    heading: str


def blocks(text: str) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a Markdown text, and what is wrong with its fences."""
    found: list[Block] = []
    problems: list[str] = []
    heading = ""
    opened: tuple[int, str, str] | None = None  # line, marker, language
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if opened is None:
            if line.startswith("#"):
                heading = line
            elif fence:
                opened, body = (number, fence.group(1), fence.group(2).strip()), []
                if not opened[2]:
                    problems.append(f"line {number}: a fence without a language (a stray close?)")
            continue
        if fence and fence.group(1).startswith(opened[1]) and not fence.group(2).strip():
            found.append(Block(opened[0], opened[2], "\n".join(body), heading))
            opened = None
        else:
            body.append(line)
    if opened is not None:
        problems.append(f"line {opened[0]}: a fence never closed")
    return found, problems


def call_problem(example: Any) -> str | None:
    """Why a call example ({"name", "arguments"}) does not fit the contract, or None."""
    tool = TOOLS_BY_NAME.get(example.get("name"))
    if tool is None:
        return f"unknown tool {example.get('name')!r}"
    try:
        tool.parse(example["arguments"])
    except WriterpoolError as exc:
        return f"{tool.name}: {exc.message}"
    return None


def undeclared(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """What in value the schema does not declare, or declares with another type."""
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else kinds
        if not any(isinstance(value, JSON_TYPES[k]) for k in allowed) or (
            isinstance(value, bool) and not {"boolean"} & set(allowed)
        ):
            return [f"{where or 'the example'}: not {' or '.join(allowed)}"]
    if isinstance(value, dict) and "properties" in schema:
        out = [f"{where}.{k}: not in the contract" for k in value if k not in schema["properties"]]
        for key, item in value.items():
            if key in schema["properties"]:
                out += undeclared(item, schema["properties"][key], f"{where}.{key}")
        return out
    if isinstance(value, list) and "items" in schema:
        return [p for i, item in enumerate(value) for p in undeclared(item, schema["items"],
                                                                      f"{where}[{i}]")]  # fmt: skip
    return []


def object_schemas(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema and every object schema inside it (SESSION, TURN, WORK, …)."""
    found = [schema] if "properties" in schema else []
    for sub in (*schema.get("properties", {}).values(), schema.get("items")):
        if isinstance(sub, dict):
            found += object_schemas(sub)
    return found


def answer_problem(example: Any, tools: list[str]) -> str | None:
    """None when example is a whole answer, or a part of one, of one of the tools."""
    candidates = [s for name in tools for s in object_schemas(TOOLS_BY_NAME[name].output_schema())]
    if "ok" in example:
        candidates = [TOOLS_BY_NAME[name].output_schema() for name in tools]
    tried = [undeclared(example, schema) for schema in candidates]
    if any(not problems for problems in tried):
        return None
    return min(tried, key=len)[0] if tried else f"no output schema for {tools}"


DOC_BLOCKS, DOC_PROBLEMS = blocks(DOC.read_text())
JSON_BLOCKS = [b for b in DOC_BLOCKS if b.language == "json"]


def _parsed(block: Block) -> Any:
    return json.loads(block.text.replace("…", "0"))  # "…" marks elided values


def _is_call(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"name", "arguments"}


def test_every_fence_is_closed_and_names_its_language() -> None:
    assert DOC_PROBLEMS == []


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=lambda b: f"line{b.line}")
def test_every_json_example_parses_and_fits_its_tool(block: Block) -> None:
    example = _parsed(block)
    if _is_call(example):
        assert call_problem(example) is None, f"line {block.line}: {call_problem(example)}"
        return
    tools = TOOL_NAME.findall(block.heading) if block.heading.startswith("### ") else []
    if tools:  # an answer of the section's tool(s)
        problem = answer_problem(example, tools)
        assert problem is None, f"line {block.line}: {problem}"


def test_every_tool_has_a_call_example() -> None:
    called = {_parsed(b)["name"] for b in JSON_BLOCKS if _is_call(_parsed(b))}
    assert called == {tool.name for tool in TOOLS}


def test_the_checks_refuse_a_stray_fence_an_unknown_tool_and_a_bad_example() -> None:
    stray = '```json\n{"a": 1}\n```\n\n{"b": 2}\n```\n\ntext\n'
    assert blocks(stray)[1] == ["line 6: a fence without a language (a stray close?)",
                                "line 6: a fence never closed"]  # fmt: skip
    assert call_problem({"name": "pi_turn_read", "arguments": {}}) == "unknown tool 'pi_turn_read'"
    bad = {"sessionId": "s-0123456789abcdef", "turnId": "t-1", "waitSeconds": 600}
    assert "waitSeconds: above the maximum" in str(
        call_problem({"name": "pi_turn_get", "arguments": bad})
    )
    missing = call_problem({"name": "pi_session_prompt", "arguments": {"sessionId": "s-1"}})
    assert missing == "pi_session_prompt: missing required argument: message"
    stale = {"turnId": "t-1", "status": "completed", "textChars": 12}
    assert answer_problem(stale, ["pi_turn_get"]) == ".textChars: not in the contract"
    wrong = {"turnId": 1, "status": "completed", "toolCalls": 3}
    assert answer_problem(wrong, ["pi_turn_get"]) == ".turnId: not string"
