"""A real MCP client session against `writerpool serve`, spawned over stdio."""

from __future__ import annotations

import json
import os
import select
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from writerpool.config.paths import Paths
from writerpool.proc import spawn

SERVE_ARGV = [sys.executable, "-m", "writerpool", "serve", "-v"]


@dataclass
class ServerEnv:
    """Everything one test's server sees: config, XDG dirs and HOME under tmp_path."""

    root: Path
    env: dict[str, str]
    paths: Paths
    workspaces: dict[str, Path]
    secrets: list[str] = field(default_factory=list)

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.paths.audit_log.exists():
            return []
        return [json.loads(line) for line in self.paths.audit_log.read_text().splitlines()]


@dataclass
class Client:
    session: ClientSession
    # Every raw text body and structured body seen, for the leak checks.
    seen: list[str] = field(default_factory=list)

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.session.call_tool(name, arguments)
        assert len(result.content) == 1
        text = result.content[0].text  # type: ignore[union-attr]
        body = json.loads(text)
        self.seen.append(text)
        self.seen.append(json.dumps(result.structured_content))
        assert result.structured_content == body, "text and structuredContent differ"
        assert result.is_error == (not body["ok"])
        if not body["ok"]:
            assert set(body) == {"ok", "error"}
            assert set(body["error"]) == {"code", "message"}
        return dict(body)

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.call(name, arguments)
        assert body["ok"], body
        return body

    async def code(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        body = await self.call(name, arguments)
        assert not body["ok"], body
        return str(body["error"]["code"])

    async def wait_turn(self, session_id: str, turn_id: str, limit: float = 120) -> dict[str, Any]:
        """Poll pi_turn_get (with its own bounded waits) until the turn ends."""
        with anyio.fail_after(limit):
            while True:
                body = await self.ok(
                    "pi_turn_get", {"sessionId": session_id, "turnId": turn_id, "waitSeconds": 10}
                )
                if body["turn"]["status"] != "running":
                    return dict(body["turn"])

    def assert_clean(self, forbidden: list[str]) -> None:
        for text in self.seen:
            for item in forbidden:
                assert item not in text, f"a response leaked {item!r}"


@asynccontextmanager
async def connect(server: ServerEnv, **session_options: Any) -> AsyncIterator[Client]:
    """Spawn the server; its stderr goes to serve.log beside the test's files.
    `session_options` go to the SDK's ClientSession (a logging_callback, say)."""
    params = StdioServerParameters(
        command=SERVE_ARGV[0], args=SERVE_ARGV[1:], env=server.env, cwd=str(server.root)
    )
    with (server.root / "serve.log").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write, **session_options) as session,
        ):
            await session.initialize()
            yield Client(session)


class RawServer:
    """`writerpool serve` driven with hand-written JSON-RPC lines, to test its process
    life (stdin EOF, signals) and that stdout carries nothing but protocol frames."""

    def __init__(self, server: ServerEnv) -> None:
        env = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
        env.update(server.env)
        self._log = (server.root / "serve-raw.log").open("ab")
        self.proc = spawn(SERVE_ARGV, cwd=server.root, env=env, stderr_to=self._log.fileno())
        self.frames: list[dict[str, Any]] = []
        self._buffer = b""
        self._ids = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 120) -> Any:
        self._ids += 1
        self.send({"id": self._ids, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            frame = self._next_frame(deadline)
            if frame.get("id") == self._ids:
                assert "result" in frame, frame
                return frame["result"]

    def initialize(self) -> None:
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test-client", "version": "0"},
            },
        )
        self.send({"method": "notifications/initialized"})

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        return dict(result["structuredContent"])

    def _next_frame(self, deadline: float) -> dict[str, Any]:
        stdout = self.proc.stdout
        assert stdout is not None
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "no answer from the server in time"
            ready, _, _ = select.select([stdout], [], [], left)
            if ready:
                chunk = os.read(stdout.fileno(), 65536)
                assert chunk, "the server closed stdout"
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame = json.loads(line)  # anything but a JSON frame on stdout fails here
        assert frame["jsonrpc"] == "2.0"
        self.frames.append(frame)
        return dict(frame)

    def rest_of_stdout(self) -> bytes:
        """What the server wrote after the last frame read, up to its exit."""
        assert self.proc.stdout is not None
        return self._buffer + self.proc.stdout.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()


def processes_in(root: Path) -> list[int]:
    """Pids (other than ours) whose working directory lies under root."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(root) or cwd.startswith(str(root) + "/"):
            found.append(int(entry.name))
    return found


def assert_no_process_in(root: Path, grace: float = 15) -> None:
    """No process (pi or a tool it ran) still works under root, after a grace period."""
    deadline = time.monotonic() + grace
    while processes_in(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_in(root) == []


def files_holding(root: Path, needle: str) -> list[Path]:
    """Regular files under root whose text contains needle."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_text(errors="ignore"):
                    found.append(path)
            except OSError:
                continue
    return found
