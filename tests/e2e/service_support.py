"""The pool service as tests drive it: `writerpool service run` in the background, raw
HTTP requests, and a real MCP client over streamable HTTP."""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.harness import Client, ServerEnv
from writerpool.proc import Process, spawn, wait
from writerpool.state.service_record import running

RUN_ARGV = [sys.executable, "-m", "writerpool", "service", "run", "-v"]
UP_SECONDS = 60.0


@dataclass
class Service:
    proc: Process
    url: str
    port: int
    record: dict[str, Any]


@contextmanager
def running_service(server: ServerEnv) -> Iterator[Service]:
    """The service of the test's configuration; stopped with SIGTERM (killed if need be)."""
    env = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
    env.update(server.env)
    with (server.root / "service.log").open("ab") as log:
        proc = spawn(RUN_ARGV, env=env, cwd=server.root, stdin_pipe=False, stderr_to=log.fileno())
    try:
        deadline = time.monotonic() + UP_SECONDS
        record = running(server.paths)
        while record is None or record["pid"] != proc.pid:  # bounded by UP_SECONDS
            assert proc.poll() is None, (server.root / "service.log").read_text()
            assert time.monotonic() < deadline, "the service did not come up"
            time.sleep(0.1)
            record = running(server.paths)
        yield Service(proc, str(record["url"]), int(record["port"]), record)
    finally:
        if proc.poll() is None:
            proc.terminate()
            if wait(proc, 40) is None:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def post(
    port: int, body: bytes, headers: dict[str, str], path: str = "/mcp", timeout: float = 60
) -> tuple[int, bytes]:
    """One raw POST to the service, headers exactly as given (Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            conn.putheader(name, value)
        # Refused before the whole body was read: the answer is still there to read.
        with suppress(BrokenPipeError, ConnectionResetError):
            conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def tool_call(name: str, arguments: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}}  # fmt: skip
    return json.dumps(message).encode()


@asynccontextmanager
async def http_client(url: str, token: str, **session_options: Any) -> AsyncIterator[Client]:
    """The SDK's own client over streamable HTTP with the client's bearer token;
    `session_options` go to its ClientSession (a logging_callback, say)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, **session_options) as session,
    ):
        await session.initialize()
        yield Client(session)
