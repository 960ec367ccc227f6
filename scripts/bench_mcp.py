"""A real MCP client on `writerpool serve` (stdio), as a coding client would use it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

SERVE_ARGV = [sys.executable, "-m", "writerpool", "serve"]


class ToolFailed(Exception):
    pass


@dataclass
class Client:
    session: ClientSession

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.session.call_tool(name, arguments)
        body: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if not body.get("ok"):
            raise ToolFailed(f"{name}: {body.get('error')}")
        return body

    async def timed(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> tuple[float, dict[str, Any]]:
        start = time.perf_counter()
        body = await self.call(name, arguments)
        return time.perf_counter() - start, body

    async def ping_seconds(self) -> float:
        start = time.perf_counter()
        await self.session.send_ping()
        return time.perf_counter() - start

    async def start_session(self, workspace: str, profile: str) -> tuple[float, dict[str, Any]]:
        """Seconds to a ready session, and the session's view."""
        seconds, body = await self.timed(
            "pi_session_start", {"workspace": workspace, "executionProfile": profile}
        )
        return seconds, dict(body["session"])

    async def close_session(self, session_id: str) -> None:
        await self.call("pi_session_close", {"sessionId": session_id})


@asynccontextmanager
async def connect(env: dict[str, str], cwd: Path, log: Path) -> AsyncIterator[Client]:
    """Spawn one `writerpool serve` and initialize an MCP session with it."""
    params = StdioServerParameters(
        command=SERVE_ARGV[0], args=SERVE_ARGV[1:], env=env, cwd=str(cwd)
    )
    with log.open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Client(session)
