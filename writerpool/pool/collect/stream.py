"""Collection's stream: the inspection and the bundle of new work, made in a throwaway
container on the writer's host and read from its stdout (clonetool's stream.py writes
the frame). Nothing of the controller is mounted into that container, and the
controller never reads the clone: only this stream, parsed as hostile and bounded.

The bundle is written to the caller's private incoming directory as it arrives, never
held in memory, and never beyond `[pool] collect_max_bundle_bytes`. A stream cut short
(the container killed, the connection lost) leaves a partial file there, which the
next collection clears before it starts.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import IO, Any

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError, failure
from writerpool.gitops.limits import LIMITS
from writerpool.pool.writer.inspect import (
    TOOL_TIMEOUT,
    Inspection,
    parse_report,
    tool_request,
    tool_spec,
)
from writerpool.proc import CommandFailed, last_line
from writerpool.report import sanitize
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import WriterState

BUNDLE_NAME = "collect.bundle"
# The inspection line: above what a clone inside LIMITS can produce (every ref named
# at its longest, twice), so only a hostile answer meets it.
REPORT_MAX_BYTES = LIMITS.refs * LIMITS.ref_name_bytes * 2 + 4 * 1024 * 1024
CHUNK_MAX = 1024 * 1024  # clonetool's stream.py writes at most this much per chunk
TRAILER_MAX = 4096
CODE = "writer_collect_failed"


def _broken(detail: str) -> WriterpoolError:
    return WriterpoolError(CODE, f"the collect stream is malformed: {detail}")


def _read_line(stream: IO[bytes], limit: int) -> bytes:
    """One line (without its newline), or what remains when the stream ends first."""
    line = stream.readline(limit + 1)
    if len(line) > limit:
        raise _broken(f"a line is longer than {limit} bytes")
    return line.removesuffix(b"\n")


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise _broken("the stream ended inside the bundle")
    return data


def read_bundle(stream: IO[bytes], dest: Path, max_bytes: int) -> int:
    """Copy the bundle's chunks to `dest` (made new); its size. Refuses a bundle larger
    than `max_bytes`, a chunk larger than CHUNK_MAX, a truncated or failed stream, and
    anything after the trailer."""
    total = 0
    with open(dest, "xb") as out:
        while True:  # bounded: every pass reads a chunk, and max_bytes caps their sum
            size = struct.unpack(">I", _read_exact(stream, 4))[0]
            if size == 0:
                break
            if size > CHUNK_MAX:
                raise _broken(f"a chunk is larger than {CHUNK_MAX} bytes")
            total += size
            if total > max_bytes:
                raise WriterpoolError(
                    "collect_bundle_too_large",
                    f"the bundle of new work is larger than [pool] collect_max_bundle_bytes "
                    f"({max_bytes} bytes); nothing was imported",
                )
            out.write(_read_exact(stream, size))
    trailer = _answer(_read_line(stream, TRAILER_MAX))
    if trailer is None or trailer.get("ok") is not True:
        error = str((trailer or {}).get("error", "no trailer"))
        raise WriterpoolError(CODE, sanitize(f"writing the bundle failed: {error[:300]}"))
    if stream.read(1):
        raise _broken("data follows the bundle")
    return total


def _answer(line: bytes) -> dict[str, Any] | None:
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


class _Reader:
    """The consumer of the container's stdout: the inspection line, then the bundle."""

    def __init__(self, incoming: Path, max_bytes: int) -> None:
        self.incoming = incoming
        self.max_bytes = max_bytes
        self.answer: dict[str, Any] | None = None

    def __call__(self, stream: IO[bytes]) -> None:
        self.answer = _answer(_read_line(stream, REPORT_MAX_BYTES))
        if self.answer is None or "error" in self.answer:
            if stream.read(1):
                raise _broken("the inspection is not JSON")
            return
        if self.answer.get("bundle") is None:
            if stream.read(1):
                raise _broken("data follows an inspection without a bundle")
            return
        if self.answer.get("bundle") != BUNDLE_NAME:
            raise _broken("the bundle is misnamed")
        read_bundle(stream, self.incoming / BUNDLE_NAME, self.max_bytes)


def stream_collect(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool, incoming: Path
) -> Inspection:
    """Inspect the clone (read-only) and receive the bundle of new work into `incoming`."""
    spec = tool_spec(paths, host, state, pool, "inspect")
    reader = _Reader(incoming, pool.collect_max_bundle_bytes)
    try:
        done = host.stream(
            spec,
            ["python3", "-m", "clonetool", "collect"],
            timeout=TOOL_TIMEOUT,
            input=json.dumps({**tool_request(state, pool), "limits": LIMITS.request()}).encode(),
            consume=reader,
        )
    except CommandFailed as exc:
        raise failure(CODE, "the throwaway container did not finish", exc) from exc
    answer = reader.answer
    if answer is None:
        last = last_line(done.stderr, "no output")
        raise failure(CODE, sanitize(f"the throwaway container failed: {last[:200]}"), text=last)
    if done.returncode != 0 or "error" in answer:
        error = str(answer.get("error"))
        raise failure(CODE, sanitize(f"in the clone: {error[:300]}"), text=error)
    return parse_report(answer)
