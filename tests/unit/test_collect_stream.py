"""Collection's stream as the controller reads it: hostile input, bounded, never trusted.

The frame is clonetool's stream.py's (one JSON line, length-prefixed chunks, a zero
length, a trailer line); each test feeds the reader bytes a writer's container could
send and checks what reaches the incoming directory.
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import IO

import pytest

from writerpool.errors import CODES, WriterpoolError
from writerpool.payload.clonetool.stream import CHUNK
from writerpool.pool.collect.stream import (
    BUNDLE_NAME,
    CHUNK_MAX,
    REPORT_MAX_BYTES,
    _Reader,
    read_bundle,
)
from writerpool.proc import CommandFailed, run_streamed

OK = json.dumps({"ok": True}).encode() + b"\n"


def chunks(*parts: bytes, end: bytes = OK) -> bytes:
    body = b"".join(struct.pack(">I", len(p)) + p for p in parts)
    return body + struct.pack(">I", 0) + end


def header(bundle: str | None = BUNDLE_NAME) -> bytes:
    return json.dumps({"head": "refs/heads/main", "bundle": bundle}).encode() + b"\n"


@pytest.fixture
def incoming(tmp_path: Path) -> Path:
    path = tmp_path / "incoming"
    path.mkdir()
    return path


def test_the_writer_and_the_reader_agree_on_the_chunk_size() -> None:
    assert CHUNK <= CHUNK_MAX


def test_a_bundle_in_chunks_arrives_whole(incoming: Path) -> None:
    reader = _Reader(incoming, max_bytes=100)
    reader(io.BytesIO(header() + chunks(b"# v2 git bundle\n", b"rest")))
    assert (incoming / BUNDLE_NAME).read_bytes() == b"# v2 git bundle\nrest"
    assert reader.answer is not None and reader.answer["head"] == "refs/heads/main"


def test_an_inspection_without_a_bundle_writes_nothing(incoming: Path) -> None:
    reader = _Reader(incoming, max_bytes=100)
    reader(io.BytesIO(header(None)))
    assert reader.answer is not None and not list(incoming.iterdir())


def test_a_bundle_over_the_cap_is_refused_before_more_is_read(incoming: Path) -> None:
    stream = io.BytesIO(header() + chunks(b"x" * 60, b"y" * 60, b"z" * 60))
    with pytest.raises(WriterpoolError) as caught:
        _Reader(incoming, max_bytes=100)(stream)
    assert caught.value.code == "collect_bundle_too_large" and caught.value.code in CODES
    # The third chunk was never read: the cap stops the copy, not the end of the stream.
    assert stream.tell() < len(stream.getvalue()) - 60
    assert (incoming / BUNDLE_NAME).stat().st_size == 60


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (chunks(b"abc")[:-10], "cut inside the trailer"),
        (struct.pack(">I", 10) + b"short", "cut inside a chunk"),
        (b"\x00\x00", "cut inside a length"),
        (struct.pack(">I", CHUNK_MAX + 1) + b"x", "a chunk above the maximum"),
        (chunks(b"abc", end=b'{"error": "git bundle failed: boom"}\n'), "a failed bundle"),
        (chunks(b"abc", end=b"not json\n"), "a trailer that is not JSON"),
        (chunks(b"abc") + b"more", "data after the trailer"),
    ],
)
def test_a_malformed_bundle_stream_is_collect_failed(incoming: Path, body: bytes, why: str) -> None:
    with pytest.raises(WriterpoolError) as caught:
        read_bundle(io.BytesIO(body), incoming / BUNDLE_NAME, max_bytes=1 << 30)
    assert caught.value.code == "writer_collect_failed", why


def test_a_failed_bundle_says_why_without_paths(incoming: Path) -> None:
    end = b'{"error": "git bundle failed: cannot read /home/agent/secret"}\n'
    with pytest.raises(WriterpoolError) as caught:
        read_bundle(io.BytesIO(chunks(b"a", end=end)), incoming / BUNDLE_NAME, max_bytes=10)
    assert "git bundle failed" in caught.value.message
    assert "/home/agent" not in caught.value.message


def test_an_endless_inspection_line_is_refused_at_its_cap(incoming: Path) -> None:
    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
            buffer[:] = b"a" * len(buffer)
            return len(buffer)

    with pytest.raises(WriterpoolError) as caught:
        _Reader(incoming, max_bytes=10)(io.BufferedReader(Endless()))  # type: ignore[type-var]
    assert caught.value.code == "writer_collect_failed"
    assert str(REPORT_MAX_BYTES) in caught.value.message


def test_a_misnamed_bundle_or_trailing_data_is_refused(incoming: Path) -> None:
    for stream in (header("../evil") + chunks(b"a"), header(None) + b"extra"):
        with pytest.raises(WriterpoolError) as caught:
            _Reader(incoming, max_bytes=10)(io.BytesIO(stream))
        assert caught.value.code == "writer_collect_failed"
    assert not list(incoming.iterdir())


def test_an_error_answer_is_kept_for_the_caller(incoming: Path) -> None:
    reader = _Reader(incoming, max_bytes=10)
    reader(io.BytesIO(b'{"error": "ToolError: refs unreadable"}'))
    assert reader.answer == {"error": "ToolError: refs unreadable"}


def test_a_streamed_command_is_read_as_it_comes_and_killed_when_the_reader_stops() -> None:
    seen: list[int] = []

    def consume(stream: IO[bytes]) -> None:
        seen.append(len(stream.read(1024 * 1024)))
        raise WriterpoolError("writer_collect_failed", "enough")

    # An endless writer: only the kill ends it.
    with pytest.raises(WriterpoolError) as caught:
        run_streamed(["cat", "/dev/zero"], env=None, timeout=60, input=b"", consume=consume)
    assert caught.value.message == "enough" and seen == [1024 * 1024]


def test_a_streamed_command_gets_its_input_and_keeps_its_stderr() -> None:
    out: list[bytes] = []
    done = run_streamed(
        ["sh", "-c", "cat; echo oops >&2; exit 4"],
        env=None,
        timeout=60,
        input=b"request",
        consume=lambda stream: out.append(stream.read()),
    )
    assert out == [b"request"] and done.returncode == 4 and done.stderr == b"oops\n"


def test_a_streamed_command_past_its_timeout_is_command_timeout() -> None:
    with pytest.raises(CommandFailed) as caught:
        run_streamed(["sleep", "30"], env=None, timeout=0.3, input=b"", consume=lambda s: None)
    assert caught.value.code == "command_timeout"
