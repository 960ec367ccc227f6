"""A service connection whose client stops reading is cut once its answers have waited
STALL_SECONDS for the client (writerpool/service/conns.py), however little is left
unsent: the real protocol on a real socket pair, with small kernel buffers."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from writerpool.service import conns
from writerpool.service.conns import BoundedH11

BODY = b"x" * 1024


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = [(b"content-length", b"%d" % len(BODY))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


@pytest.mark.parametrize("requests", [2, 40, 400])
def test_a_client_that_reads_nothing_is_cut_whatever_is_left_unsent(
    requests: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 answers fit in the kernel's buffers (nothing waits: the connection stays for its
    keep-alive); 40 leave a few KiB in the transport, under its 64 KiB mark; 400 pass it."""
    monkeypatch.setattr(conns, "STALL_SECONDS", 0.5)

    async def run() -> bool:
        config = Config(app=_app, lifespan="off", timeout_keep_alive=30)
        config.load()
        ours, theirs = socket.socketpair()  # theirs closed below; ours by the transport
        for sock, option in ((ours, socket.SO_SNDBUF), (theirs, socket.SO_RCVBUF)):
            sock.setsockopt(socket.SOL_SOCKET, option, 4096)
        protocol = BoundedH11(config=config, server_state=ServerState(), app_state={})
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=ours)
        theirs.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * requests)
        try:
            for _ in range(50):  # bounded: 5 s, ten times the stall deadline
                await asyncio.sleep(0.1)
                if transport.is_closing():
                    return True
            return False
        finally:
            transport.abort()
            theirs.close()

    cut = asyncio.run(run())
    assert cut == (requests > 2), f"{requests} answers unread: cut {cut}"
