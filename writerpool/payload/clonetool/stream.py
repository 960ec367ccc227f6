"""`collect`: the inspection and the bundle of new work, streamed on stdout.

Nothing of the controller is mounted for it: the bundle leaves the container the way
the request came in, over its stdio. The frame (pool/collect/stream.py reads it):

    one line of JSON: the inspection, as `inspect` answers it (or {"error": ...})
    when it names a bundle: chunks, each a 4-byte big-endian length and that many
    bytes, ended by a zero length; then one line of JSON, {"ok": true} or {"error": ...}

git writes the bundle to a pipe, so the bundle is never held in memory or in /tmp.
"""

from __future__ import annotations

import json
import struct
import subprocess  # noqa: TID251 - runs inside the container, not on the host
import tempfile
from typing import IO, Any

from .gitrun import WORK, ToolError, git_argv
from .scan import BundlePlan, scan

CHUNK = 1024 * 1024  # the reader refuses a larger chunk


def collect(request: dict[str, Any], out: IO[bytes]) -> None:
    result, plan = scan(request, bundle=True)
    out.write(json.dumps(result).encode() + b"\n")
    if plan is None:
        return
    try:
        _stream_bundle(plan, out)
    except (ToolError, OSError) as exc:
        out.write(struct.pack(">I", 0))
        out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}).encode() + b"\n")
        return
    out.write(struct.pack(">I", 0) + json.dumps({"ok": True}).encode() + b"\n")


def _stream_bundle(plan: BundlePlan, out: IO[bytes]) -> None:
    argv = git_argv(["bundle", "create", "-q", "-", *plan.refs, "--not", *plan.exclude])
    with tempfile.TemporaryFile(dir="/tmp") as errors:
        proc = subprocess.Popen(argv, env=plan.env, cwd=WORK, stdout=subprocess.PIPE,
                                stderr=errors, stdin=subprocess.DEVNULL)  # fmt: skip
        stdout = proc.stdout
        if stdout is None:
            raise ToolError("git bundle has no stdout")
        for chunk in iter(lambda: stdout.read(CHUNK), b""):
            out.write(struct.pack(">I", len(chunk)) + chunk)
        if proc.wait() != 0:
            errors.seek(0)
            tail = errors.read(64 * 1024).decode(errors="replace").strip().splitlines()[-1:]
            raise ToolError(f"git bundle failed: {(tail or [''])[0][:200]}")
