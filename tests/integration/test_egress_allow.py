"""Approve on deny, for the session: `egress allow` adds a session-scoped entry the
live allowlist proxy takes at its next decision, audited with who and until when, and
refused again once its time has come (the proxy's clock is injected, never waited out)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from tests.support.connect import Records, connect, host, open_proxy
from tests.support.egress import client_hello
from writerpool.config.paths import Paths
from writerpool.egress import grants
from writerpool.egress.grants import GrantWatch
from writerpool.egress.loop import InProcessLoop
from writerpool.errors import WriterpoolError
from writerpool.pool.modes import egress_allow, egress_view

SESSION = "s-0123456789abcdef"
WRITER = "ws-w1"

__all__ = ["host"]  # fixtures


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def serve_hellos(server: socket.socket, count: int) -> None:
    def answer() -> None:
        for _ in range(count):
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"reached")

    threading.Thread(target=answer, daemon=True).start()


def test_an_entry_added_for_the_session_is_taken_live_and_ends_at_its_time(
    host: InProcessLoop, tmp_path: Path
) -> None:
    paths = Paths.from_env()
    record = paths.writer_record(WRITER)
    (record.path / "clone").mkdir(parents=True)  # a writer that exists
    upstream = socket.create_server(("127.0.0.1", 0))
    port = upstream.getsockname()[1]
    serve_hellos(upstream, 1)
    clock = Clock(1_800_000_000.0)
    records = Records()
    proxy = open_proxy(host, tmp_path, ("listed.test", "127.0.0.1/32"), records,
                       {"later.test": ("127.0.0.1",)},
                       grants=GrantWatch(record.egress_grants, SESSION, clock))  # fmt: skip
    target = f"later.test:{port}"
    try:
        for bad, code in (("bad_name!", "egress_allow_target_invalid"),
                          ("*.later.test", "egress_allow_target_invalid")):  # fmt: skip
            with pytest.raises(WriterpoolError) as caught:
                egress_allow.allow(paths, WRITER, bad)
            assert caught.value.code == code
        with pytest.raises(WriterpoolError) as caught:
            egress_allow.allow(paths, WRITER, target, "5d")
        assert caught.value.code == "egress_allow_duration_invalid"
        with pytest.raises(WriterpoolError) as caught:  # no session with an allowlist yet
            egress_allow.allow(paths, WRITER, target)
        assert caught.value.code == "egress_allow_no_session"
        assert not record.egress_grants.exists()
        grants.open_session(record.egress_grants, SESSION, proxy.listener.socket_path)
        sock, head = connect(proxy, target)
        sock.close()
        assert "(not_listed)" in head.split("\r\n")[0]
        report = egress_allow.allow(paths, WRITER, target, "30m", now=clock)
        assert report.codes() == ["egress_allow_added"]
        sock, head = connect(proxy, target)  # the same proxy, not restarted
        with sock:
            assert head.startswith("HTTP/1.1 200 ")
            sock.sendall(client_hello("later.test"))
            assert sock.recv(16) == b"reached"
        records.wait(2)  # a tunnel's line is written when it ends: keep the lines in order
        clock.now += 30 * 60  # its time has come
        sock, head = connect(proxy, target)
        sock.close()
        assert "(not_listed)" in head.split("\r\n")[0]
    finally:
        proxy.stop()
        upstream.close()
    seen = [(r.allowed, r.reason, r.entry, r.until) for r in records.wait(3)]
    until = clock.now
    assert seen == [(False, "not_listed", None, None), (True, "allowed", target, until),
                    (False, "not_listed", None, None)]  # fmt: skip
    lines = [json.loads(x) for x in paths.audit_log.read_text().splitlines()]
    [added] = [x for x in lines if x["action"] == "egress_allow"]
    assert (added["entry"], added["scope"], added["writer"], added["session"]) == (
        target, "session", WRITER, SESSION)  # fmt: skip
    assert added["until"].startswith("2027-01-15T08:30:00") and added["by"]
    grants.close_session(record.egress_grants, SESSION)
    assert not record.egress_grants.exists()
    log = egress_view.log(paths, WRITER)
    assert "session-scoped until" in log.findings[0].message


def test_the_proxy_ignores_another_sessions_entries(host: InProcessLoop, tmp_path: Path) -> None:
    path = tmp_path / "egress-grants.json"
    grants.open_session(path, "s-other", tmp_path / "connect.sock")
    grant = grants.Grant(entry="later.test", until=2e9, by="op")
    grants.add(path, "s-other", grant, 1e9)
    assert GrantWatch(path, SESSION, lambda: 1e9).live().entries == ()
    assert [e.text for e in GrantWatch(path, "s-other", lambda: 1e9).live().entries] == [
        "later.test"
    ]
    with pytest.raises(WriterpoolError) as caught:
        grants.add(path, SESSION, grant, 1e9)
    assert caught.value.code == "egress_allow_no_session"
