"""The egress proxies' pure parts: header and query rules, sockets, audit lines."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from writerpool.audit import connect_line, egress_auditor, egress_line
from writerpool.config.paths import Paths
from writerpool.egress import model
from writerpool.egress.connect_model import ConnectRecord
from writerpool.egress.model import EgressRecord
from writerpool.egress.rules import (
    downstream_headers,
    sanitize_path,
    strip_key_param,
    upstream_headers,
)
from writerpool.egress.sockets import listening_socket, remove_stale_socket
from writerpool.errors import WriterpoolError


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="egu", dir="/tmp"))
    try:
        yield path
    finally:
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


def proxy(headers: list[tuple[str, str]]) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(headers))


def test_every_credential_and_hop_header_is_dropped_and_the_real_key_set() -> None:
    incoming = proxy([
        ("Authorization", "Bearer token"), ("Proxy-Authorization", "Basic x"),
        ("X-Api-Key", "a"), ("x-goog-api-key", "b"), ("api-key", "c"), ("Cookie", "d=e"),
        ("Connection", "keep-alive, X-Private"), ("X-Private", "p"), ("Keep-Alive", "5"),
        ("Transfer-Encoding", "chunked"), ("Host", "127.0.0.1:3"), ("Content-Length", "9"),
        ("Content-Type", "application/json"), ("Accept", "text/event-stream"),
    ])  # fmt: skip
    out = upstream_headers(incoming, "x-api-key", "sk-real")
    assert dict(out) == {
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "x-api-key": "sk-real",
    }
    down = downstream_headers(proxy([("Set-Cookie", "s=1"), ("Content-Type", "text/event-stream"),
                                     ("Transfer-Encoding", "chunked")]))  # fmt: skip
    assert dict(down) == {"Content-Type": "text/event-stream"}


def test_a_key_query_parameter_is_removed_and_the_rest_kept_as_sent() -> None:
    assert strip_key_param("alt=sse&key=secret") == "alt=sse"
    assert strip_key_param("KEY=1&%6Bey=2&keys=3&a=%2F") == "keys=3&a=%2F"
    assert strip_key_param("") == ""


def test_audit_paths_are_plain_or_refused() -> None:
    assert sanitize_path("/p/v1/messages?key=s") == "/p/v1/messages"
    assert sanitize_path("/p/%2e%2e/x") == "<refused>"
    assert sanitize_path("/p/a b") == "<refused>"


def test_an_egress_audit_line_holds_counts_and_sanitized_fields_only(tmp_path: Path) -> None:
    record = EgressRecord(session="s-1", writer="demo-w1", method="POST",
                          path="/chat/completions", status=200, outcome=model.OK,
                          bytes_up=10, bytes_down=20, duration_ms=3)  # fmt: skip
    line = json.loads(egress_line(record))
    assert line["action"] == "egress" and line["outcome"] == "egress_ok"
    assert (line["method"], line["path"], line["status"]) == ("POST", "/chat/completions", 200)
    assert (line["bytesUp"], line["bytesDown"], line["durationMs"]) == (10, 20, 3)
    hostile = EgressRecord(session="s\n1", writer=None, method="post /x", path="/a?key=k",
                           status=200, outcome="ok\n", bytes_up=-1, bytes_down=0,
                           duration_ms=0)  # fmt: skip
    line = json.loads(egress_line(hostile))
    assert line["session"] == line["method"] == line["path"] == line["outcome"] == "<refused>"
    assert line["bytesUp"] == 0
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    egress_auditor(paths)(record)
    assert stat.S_IMODE(paths.audit_log.stat().st_mode) == 0o600
    assert json.loads(paths.audit_log.read_text())["path"] == "/chat/completions"


def test_an_allowlist_audit_line_names_the_tls_name_and_address_it_judged() -> None:
    record = ConnectRecord(session="s-1", writer="demo-w1", method="CONNECT",
                           destination="origin.test:443", allowed=False, reason="sni_mismatch",
                           entry="origin.test", address="192.0.2.7", bytes_up=0,
                           bytes_down=0, duration_ms=2, sni="other.test")  # fmt: skip
    line = json.loads(connect_line(record))
    seen = (line["decision"], line["reason"], line["sni"], line["address"])
    assert seen == ("denied", "sni_mismatch", "other.test", "192.0.2.7")
    hostile = dataclasses.replace(record, sni="a b\n", address=None)
    line = json.loads(connect_line(hostile))
    assert (line["sni"], line["address"]) == ("<refused>", None)


def test_the_socket_is_private_from_the_start_and_replaces_a_stale_one(short_dir: Path) -> None:
    path = short_dir / "new" / "egress.sock"
    sock, inode = listening_socket(path)
    try:
        assert stat.S_ISSOCK(os.lstat(path).st_mode) and os.lstat(path).st_ino == inode
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        sock.close()
    again, _ = listening_socket(path)  # the old file is a stale socket now
    try:
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(path))
        client.close()
        assert sorted(p.name for p in path.parent.iterdir()) == ["egress.sock"]
    finally:
        again.close()
        path.unlink()
        path.parent.rmdir()


def test_anything_but_a_socket_at_the_path_is_refused(short_dir: Path) -> None:
    plain = short_dir / "file"
    plain.write_text("x")
    with pytest.raises(WriterpoolError) as err:
        listening_socket(plain)
    assert err.value.code == "egress_failed"
    assert plain.read_text() == "x"


def test_remove_stale_socket_keeps_live_sockets_files_and_symlinks(short_dir: Path) -> None:
    live = short_dir / "live.sock"
    holder, _ = listening_socket(live)
    try:
        assert remove_stale_socket(live) is False
        assert live.exists()
    finally:
        holder.close()
    link = short_dir / "link.sock"
    link.symlink_to(live)
    assert remove_stale_socket(link) is False  # never followed
    plain = short_dir / "plain"
    plain.write_text("")
    assert remove_stale_socket(plain) is False
    assert remove_stale_socket(short_dir / "absent") is False
    assert remove_stale_socket(live) is True  # nobody listens any more
    assert not live.exists() and link.is_symlink()
