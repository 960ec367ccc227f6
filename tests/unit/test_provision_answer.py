"""The provisioning container's answer is hostile input: bounded, parsed into a model,
and turned into a baseline only from refs it names."""

from __future__ import annotations

import json

import pytest

from writerpool.errors import WriterpoolError
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
