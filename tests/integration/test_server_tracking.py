"""Which running servers keep the settings they loaded: a `writerpool serve` running
alone is counted (so `mode set --apply` asks for its restart), a `serve` relaying to the
pool service is not (the service re-reads the settings itself). Real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.writers_support import wp, write_workspaces
from writerpool.config.paths import Paths
from writerpool.state.servers import count_alone

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "0"}},
}  # fmt: skip


@pytest.fixture
def paths(isolated_env: Path) -> Iterator[Paths]:
    write_workspaces({})
    try:
        yield Paths.from_env()
    finally:
        wp("service", "stop", check=True)


def _serving(paths: Paths) -> int:
    """Start `writerpool serve`, have it answer initialize, count, and let it end."""
    argv = [sys.executable, "-m", "writerpool", "serve"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        assert answer["id"] == 1 and "result" in answer, answer
        counted = count_alone(paths)
        server.stdin.close()
        assert server.wait(timeout=60) == 0
    return counted


def test_a_serve_running_alone_is_counted_and_a_relay_is_not(paths: Paths) -> None:
    assert _serving(paths) == 1
    assert count_alone(paths) == 0, "it ended: no longer counted"
    wp("service", "start", check=True)
    assert _serving(paths) == 0, "a relay to the service picks changes up through it"
