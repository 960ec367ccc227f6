"""Who holds the service's port, the header helper's refusals, and which servers keep
the settings they loaded: the parts that keep a client's token from another account."""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from writerpool.clients import header
from writerpool.config.paths import Paths
from writerpool.pool.modes.change import _restart_note
from writerpool.proc import started
from writerpool.report import Report
from writerpool.state import tokens
from writerpool.state.servers import count_alone, servers_dir
from writerpool.state.service_record import record_file, url_of

# /proc/net/tcp and tcp6 as the kernel prints them (trimmed to the columns read): uid
# 1002 listens on 127.0.0.1:41234 (0xA112), root on the IPv4 wildcard of 41235, uid 1003
# on the IPv6 wildcard of 41236, uid 1004 on ::ffff:127.0.0.1:41237; an established
# connection from 41234 and a listener on 127.0.0.2:41234 take nothing.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:A112 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 1 1
   1: 00000000:A113 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:A112 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1005        0 3 1
   3: 0200007F:A112 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1006        0 4 1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000000000000:A114 00000000000000000000000000000000:0000 0A 0:0 0:0 0 1003
   1: 0000000000000000FFFF00000100007F:A115 00000000000000000000000000000000:0000 0A 0:0 0:0 0 1004
"""


def test_the_socket_tables_name_every_listener_that_takes_the_loopback_port() -> None:
    assert header.parse_listeners(TCP, 41234) == [1002]
    assert header.parse_listeners(TCP, 41235) == [0]
    assert header.parse_listeners(TCP6, 41236) == [1003]
    assert header.parse_listeners(TCP6, 41237) == [1004]
    assert header.parse_listeners(TCP, 41239) == []
    assert header.parse_listeners("garbage\n0: zz:zz zz 0A x x x x\n", 1) == []


@pytest.fixture
def service_dir(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A service directory whose record names this process, listening on a real port."""
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    tokens.hold(paths, "codex")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        record = {"pid": os.getpid(), "started": started(os.getpid()), "port": port,
                  "url": url_of(port)}  # fmt: skip
        record_file(paths).write_text(json.dumps(record))  # as the service writes it
        yield paths.service_dir, port


def _helper(directory: Path, client: str, url: str) -> subprocess.CompletedProcess[bytes]:
    """As a client runs it: by its path, isolated, with HOME and PATH only."""
    argv = [sys.executable, "-I", header.__file__, str(directory), client, url]
    env = {"HOME": "/nonexistent", "PATH": os.environ["PATH"]}
    return subprocess.run(argv, capture_output=True, env=env, timeout=30, check=False)


def test_the_helper_imports_only_the_standard_library() -> None:
    """Clients run it by its path in isolated mode, where writerpool is not importable."""
    tree = ast.parse(Path(header.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]  # fmt: skip
    imported += [node.module or "" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0]  # fmt: skip
    assert {"json", "os", "sys"} <= set(imported), "the scan no longer sees its imports"
    assert [n for n in imported if n.split(".")[0] not in sys.stdlib_module_names] == []


def test_the_helper_gives_the_held_token_only_to_the_service_listening_at_the_url(
    service_dir: tuple[Path, int],
) -> None:
    directory, port = service_dir
    held = tokens.held_file(directory, "codex").read_text()
    assert oct(tokens.held_file(directory, "codex").stat().st_mode & 0o777) == "0o600"
    given = _helper(directory, "codex", url_of(port))
    assert given.returncode == 0, given.stderr
    assert json.loads(given.stdout) == {"Authorization": f"Bearer {held}"}
    for client, url, why in (
        ("codex", url_of(port + 1), b"another URL"),
        ("claude-code", url_of(port), b"holds no token"),
        ("../codex", url_of(port), b"not a client name"),
    ):
        refused = _helper(directory, client, url)
        assert (refused.returncode, refused.stdout) == (1, b""), refused
        assert why in refused.stderr and held.encode() not in refused.stderr


def test_the_helper_refuses_when_the_service_is_gone(service_dir: tuple[Path, int]) -> None:
    directory, port = service_dir
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    record = {"pid": int(dead.stdout), "port": port, "url": url_of(port)}
    (directory / "service.json").write_text(json.dumps(record))
    refused = _helper(directory, "codex", url_of(port))
    assert (refused.returncode, refused.stdout) == (1, b"")
    assert b"not running" in refused.stderr
    (directory / "service.json").unlink()
    assert _helper(directory, "codex", url_of(port)).returncode == 1


def test_the_helper_refuses_when_the_services_number_is_another_process_now(
    service_dir: tuple[Path, int],
) -> None:
    """The record names this process (listening on the port), but a process that started
    at another time: the service that wrote it died and its pid came round again."""
    directory, port = service_dir
    record = json.loads((directory / "service.json").read_text())
    assert header._runs(record)  # the fixture's record, as the service writes it
    record["started"] += 1
    (directory / "service.json").write_text(json.dumps(record))
    refused = _helper(directory, "codex", url_of(port))
    assert (refused.returncode, refused.stdout) == (1, b"")
    assert b"not running" in refused.stderr


def test_the_helper_refuses_a_port_nobody_of_this_account_listens_on(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    tokens.hold(paths, "codex")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    record = {"pid": os.getpid(), "port": port, "url": url_of(port)}
    record_file(paths).write_text(json.dumps(record))
    refused = _helper(paths.service_dir, "codex", url_of(port))
    assert (refused.returncode, refused.stdout) == (1, b""), refused
    assert b"held by nobody" in refused.stderr


def test_revoking_a_held_token_removes_it(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    tokens.hold(paths, "codex")
    held = tokens.held_file(paths.service_dir, "codex")
    first = held.read_text()
    tokens.hold(paths, "codex")
    assert held.read_text() == first, "a held token is kept, not replaced"
    tokens.revoke(paths, "codex")
    assert not held.exists() and "codex" not in tokens.load(paths)


ALONE = """
import sys
from writerpool.config.paths import Paths
from writerpool.state.servers import serving_alone
with serving_alone(Paths(*(__import__("pathlib").Path(a) for a in sys.argv[1:4]))):
    print("serving", flush=True)
    sys.stdin.read()
"""


def test_servers_running_alone_are_counted_until_they_die(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "config.toml", tmp_path / "state", tmp_path / "cache")
    assert count_alone(paths) == 0
    report = Report("mode set")
    _restart_note(paths, report, "workspace/demo")
    assert report.findings == [], "no server running: no restart to ask for"
    argv = [sys.executable, "-c", ALONE, *map(str, (paths.config_file, paths.state_dir,
                                                   paths.cache_dir))]  # fmt: skip
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as server:
        assert server.stdout is not None and server.stdout.readline() == b"serving\n"
        assert count_alone(paths) == 1
        _restart_note(paths, report, "workspace/demo")
        [note] = report.findings
        assert (note.code, note.status, note.data["servers"]) == (
            "controllers_restart_required", "warning", 1,
        )  # fmt: skip
        os.kill(server.pid, signal.SIGKILL)  # no clean exit: its file stays behind
        server.wait()
    assert len(list(servers_dir(paths).iterdir())) == 1
    assert count_alone(paths) == 0, "the kernel dropped the dead server's lock"
    assert list(servers_dir(paths).iterdir()) == [], "its leftover is removed"
