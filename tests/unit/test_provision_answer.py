"""The provisioning container's answer is hostile input: bounded, parsed into a model,
and turned into a baseline only from refs it names; the container reads one bounded
request (from its environment; stdin is the bundle)."""

from __future__ import annotations

import io
import json

import pytest

from writerpool.errors import WriterpoolError
from writerpool.payload.clonetool.gitrun import ToolError
from writerpool.payload.clonetool.provision import MAX_REQUEST, read_request
from writerpool.pool.provision.stream import MAX_ANSWER, _baseline, _parse, _read_answer

OID = "a" * 40
GOOD = {"head": "refs/heads/main", "commit": OID, "size": 10,
        "refs": {"refs/heads/main": OID, "refs/tags/v1": "b" * 40}}  # fmt: skip


def test_a_good_answer_gives_the_baseline_of_its_refs() -> None:
    baseline = _baseline(_parse(json.dumps(GOOD).encode(), b"", 0))
    assert baseline.branches == {"main": OID} and baseline.tags == {"refs/tags/v1": "b" * 40}
    assert (baseline.head, baseline.commit) == ("refs/heads/main", OID)


@pytest.mark.parametrize(
    ("stdout", "returncode"),
    [
        (b"", 0),
        (b"[1]", 0),
        (json.dumps({"error": "ToolError: the base bundle lacks its branch"}).encode(), 1),
        (json.dumps(GOOD).encode(), 1),
        (json.dumps({**GOOD, "commit": "not-an-oid"}).encode(), 0),
        (json.dumps({**GOOD, "extra": 1}).encode(), 0),
        (b" " * (MAX_ANSWER + 1), 0),
    ],
)
def test_a_bad_answer_is_writer_clone_failed(stdout: bytes, returncode: int) -> None:
    with pytest.raises(WriterpoolError) as exc:
        _parse(stdout, b"podman: some error\n", returncode)
    assert exc.value.code == "writer_clone_failed"


@pytest.mark.parametrize(
    "text", [None, "", '{"branch": "main"', "[1]", "x" * (MAX_REQUEST + 1), "not json"]
)
def test_the_container_refuses_a_request_it_cannot_read(text: str | None) -> None:
    with pytest.raises((ToolError, ValueError)):
        read_request(text)


def test_the_request_is_read_from_its_text() -> None:
    assert read_request('{"branch": "main"}') == {"branch": "main"}


def test_an_answer_past_its_bound_is_refused_as_it_is_read() -> None:
    answer = bytearray()
    _read_answer(io.BytesIO(b"{}"), answer)
    assert answer == b"{}"
    with pytest.raises(WriterpoolError) as exc:
        _read_answer(io.BytesIO(b" " * (MAX_ANSWER + 1)), bytearray())
    assert exc.value.code == "writer_clone_failed"
