"""The provisioning container's answer is hostile input: bounded, parsed into a model,
and turned into a baseline only from refs it names; the container reads one bounded
request line before the bundle."""

from __future__ import annotations

import io
import json

import pytest

from writerpool.errors import WriterpoolError
from writerpool.pool.clonetool.gitrun import ToolError
from writerpool.pool.clonetool.provision import MAX_REQUEST, read_request
from writerpool.pool.provision_stream import MAX_ANSWER, _baseline, _parse

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
    "stream",
    [b"", b'{"branch": "main"}', b"[1]\n", b"x" * (MAX_REQUEST + 2) + b"\n", b"not json\n"],
)
def test_the_container_refuses_a_request_line_it_cannot_read(stream: bytes) -> None:
    with pytest.raises((ToolError, ValueError)):
        read_request(io.BytesIO(stream))


def test_the_request_line_is_read_and_the_bundle_left_on_the_stream() -> None:
    stream = io.BytesIO(b'{"branch": "main"}\n# v2 git bundle\n')
    assert read_request(stream) == {"branch": "main"}
    assert stream.read() == b"# v2 git bundle\n"
