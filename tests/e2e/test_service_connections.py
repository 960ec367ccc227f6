"""The pool service against hostile or vanished local clients: anyone who reaches
127.0.0.1 (or the user's socket) may open connections and never finish a request, which
must not take the service's descriptors from the clients that hold a token; and a client
that is gone (a killed relay, a revoked token) leaves no session holding a writer."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import signal
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import MakeServer
from tests.e2e.harness import RawServer, ServerEnv, processes_in
from tests.e2e.service_support import post, running_service, tool_call
from writerpool.mcp.http import MAX_BODY_BYTES
from writerpool.service.conns import MAX_WAITING
from writerpool.sessions.seats import CLIENT_CALLS
from writerpool.state import tokens

pytestmark = pytest.mark.pi

# More connections than the descriptors a process gets by default (1,024).
IDLE_TCP = 1100
IDLE_UNIX = 300
DRIPPING = 100
CONNECT_SECONDS = 3.0
HOST_CODE = {"workspace": "hosted", "executionProfile": "code"}


def _headers(port: int, token: str) -> dict[str, str]:
    return {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {token}"}  # fmt: skip


@contextlib.contextmanager
def _descriptors(wanted: int) -> Iterator[None]:
    """This test process's own limit raised for the attacker's sockets, then restored."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.fail(f"the test needs {wanted} descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _open(
    family: int, address: str | tuple[str, int], count: int, first: bytes
) -> list[socket.socket]:
    """Up to `count` connections, each sending `first` (maybe nothing) and then waiting.
    Stops at the first that cannot connect (the service's queue is full)."""
    opened: list[socket.socket] = []
    for _ in range(count):  # bounded by count
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_SECONDS)
        try:
            sock.connect(address)
            if first:
                sock.sendall(first)
        except OSError:
            sock.close()
            break
        opened.append(sock)
    return opened


def _descriptors_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether the service closed it (a non-blocking look: nothing to read is open;
    whatever the service sent before closing is read past)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):  # bounded by what the service sent
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


# How long the service may take to notice a client is gone (its warm-pool round is 1 s;
# a hosted session's close takes a few).
GONE_BOUND = 60.0


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GONE_BOUND
    while not condition():  # bounded by GONE_BOUND
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_idle_and_dripping_connections_starve_no_client(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    good = tokens.create(server.paths, "alpha")
    held: list[socket.socket] = []
    with running_service(server) as service, _descriptors(4 * IDLE_TCP):
        port, unix = service.port, str(service.record["socket"])
        try:
            held += _open(socket.AF_INET, ("127.0.0.1", port), IDLE_TCP, b"")
            held += _open(socket.AF_UNIX, unix, IDLE_UNIX, b"")
            held += _open(socket.AF_INET, ("127.0.0.1", port), DRIPPING,
                          b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # fmt: skip
            # Another client is served while every one of them is still open here.
            status, body = post(port, tool_call("pi_capabilities_get", {}), _headers(port, good))
            assert status == 200, body
            assert b"configFingerprint" in body
            # The service closes all but the newest waiters itself, within a bound.
            _until(lambda: _descriptors_of(service.proc.pid) < 2 * MAX_WAITING + 128,
                   "the service holds the waiting connections' descriptors")  # fmt: skip
            # Connections still in the listen queue are closed once the service accepts
            # them, which a loaded machine may take a while to do.
            _until(lambda: sum(not _closed_by_peer(sock) for sock in held) <= MAX_WAITING,
                   "more connections than MAX_WAITING stay open")  # fmt: skip
            # A body just under the cap is read and answered; one just over is refused.
            under = tool_call("pi_capabilities_get", {})
            under += b" " * (MAX_BODY_BYTES - len(under))
            assert post(port, under, _headers(port, good))[0] == 200
            assert post(port, under + b" ", _headers(port, good))[0] == 413
        finally:
            for sock in held:  # bounded by the connections opened above
                sock.close()
    log = (server.root / "service.log").read_text()
    assert log.count("the oldest are closed") == 1, log[-2000:]


def _pipeline_unread(path: str, port: int, count: int, requests: int) -> list[socket.socket]:
    """`count` connections on the service's Unix socket (whose buffers do not grow as
    loopback TCP's do, up to megabytes), each sending `requests` pipelined requests
    without a token (each answered 401) and reading nothing: the service's answers fill
    the buffers, and its writes to them wait."""
    head = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() * requests
    socks = []
    for _ in range(count):  # bounded by count
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        sock.setblocking(False)
        socks.append(sock)
    sent = [0] * count
    deadline = time.monotonic() + 5  # the buffers fill within it; the rest stays unsent
    while time.monotonic() < deadline and min(sent) < len(head):
        for index, sock in enumerate(socks):  # bounded by count
            with contextlib.suppress(BlockingIOError):
                if sent[index] < len(head):
                    sent[index] += sock.send(head[sent[index] : sent[index] + 65536])
        time.sleep(0.01)
    return socks


def test_clients_that_pipeline_requests_and_never_read_are_cut(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    """Every answer (a 401 here, before any token) waits on the client's reading; a
    client that reads nothing must not keep its connection, and its descriptor, for good."""
    server = make_server(pi_prefix)
    good = tokens.create(server.paths, "alpha")
    with running_service(server) as service:
        port, pid = service.port, service.proc.pid
        call = tool_call("pi_capabilities_get", {})
        assert post(port, call, _headers(port, good))[0] == 200  # what it opens on first use
        before = _descriptors_of(pid)
        stuck = _pipeline_unread(str(service.record["socket"]), port, 6, 6000)
        try:
            assert _descriptors_of(pid) >= before + 4, "the service holds them now"
            status, body = post(port, call, _headers(port, good))
            assert status == 200, body
            deadline = time.monotonic() + GONE_BOUND
            while (now := _descriptors_of(pid)) > before + 2:  # bounded by GONE_BOUND
                assert time.monotonic() < deadline, (
                    f"connections whose clients read nothing keep their descriptors: the "
                    f"service had {before}, has {now}: {os.listdir(f'/proc/{pid}/fd')}"
                )
                time.sleep(0.2)
        finally:
            for sock in stuck:  # bounded by the connections opened above
                sock.close()
    # Thousands of refused requests, a handful of log lines (the 1st, 10th, 100th...).
    refused = (server.root / "service.log").read_text().count("refused a request")
    assert 1 <= refused <= 8, refused


@pytest.mark.parametrize("gone", ["relay killed", "token revoked"])
def test_a_session_whose_client_is_gone_is_closed_by_the_service(
    make_server: MakeServer, pi_prefix: Path, gone: str
) -> None:
    """Nobody else may reach such a session (session_unknown), so the service itself
    closes it: its agent ends and its lease is released, without waiting for a stop."""
    server = make_server(pi_prefix)
    with running_service(server) as service:
        raw = RawServer(server)  # relays, the service running
        try:
            raw.initialize()
            started = raw.call("pi_session_start", HOST_CODE)
            assert started["ok"], started
            relay = tokens.relay_name(raw.proc.pid)
            assert relay in tokens.load(server.paths)
            assert processes_in(server.root / "ws")
            if gone == "relay killed":
                raw.proc.send_signal(signal.SIGKILL)
                raw.proc.wait(30)
            else:
                tokens.revoke(server.paths, relay)
            # No other client calls: the service notices on its own.
            _until(lambda: not processes_in(server.root / "ws"), "the session's agent still runs")
            _until(lambda: relay not in tokens.load(server.paths), "the relay's token is left")
            assert service.proc.poll() is None
        finally:
            raw.close()
    log = (server.root / "service.log").read_text()
    assert "client is gone" in log, log[-2000:]


def _structured(body: bytes) -> dict[str, Any]:
    """The tool result of one answer (plain JSON or one server-sent event)."""
    for line in body.splitlines():  # bounded by the answer
        text = line.removeprefix(b"data: ").strip()
        if text.startswith(b"{"):
            return dict(json.loads(text)["result"]["structuredContent"])
    raise AssertionError(body[:500])


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


HOLDING_CALLS = 40  # as many as the worker threads every client shares by default


def test_one_client_cannot_hold_the_worker_threads_of_another(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    server = make_server(pi_prefix)
    alpha = tokens.create(server.paths, "alpha")
    beta = tokens.create(server.paths, "beta")
    with running_service(server) as service, ThreadPoolExecutor(HOLDING_CALLS) as pool:
        port = service.port

        def call(token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
            status, body = post(port, tool_call(tool, args), _headers(port, token))
            assert status == 200, body
            return _structured(body)

        sid = call(alpha, "pi_session_start", HOST_CODE)["session"]["sessionId"]
        turn = call(alpha, "pi_session_prompt", {"sessionId": sid, "message": "take-your-time"})
        base = _threads(service.proc.pid)
        wait = {"sessionId": sid, "turnId": turn["turnId"], "waitSeconds": 60}
        held = [pool.submit(call, alpha, "pi_turn_get", wait) for _ in range(HOLDING_CALLS)]

        # Every call of the first client is taken: refused, or running in a thread.
        def taken() -> bool:
            refused = sum(future.done() for future in held)
            return (
                refused >= HOLDING_CALLS - CLIENT_CALLS
                or _threads(service.proc.pid) >= base + CLIENT_CALLS
            )

        _until(taken, "no call is running")
        # The other client is answered while every call of the first still waits.
        assert call(beta, "pi_capabilities_get", {})["ok"]
        ended = [future.result() for future in held if future.done()]
        assert all(not body["ok"] for body in ended), ended
        assert len(ended) == HOLDING_CALLS - CLIENT_CALLS, ended
        assert {body["error"]["code"] for body in ended} == {"calls_busy"}
        assert call(alpha, "pi_session_close", {"sessionId": sid})["ok"]
        for future in held:  # bounded: the close ends the turn every wait waits for
            future.result(timeout=GONE_BOUND)
    outcomes = [line["outcome"] for line in server.audit_lines() if line.get("client") == "alpha"]
    assert outcomes.count("calls_busy") == HOLDING_CALLS - CLIENT_CALLS


WAITING_CLIENTS = 3  # 3 x 16 waits: more than the 40 threads every client used to share
WAIT = 60  # seconds, the most a pi_turn_get may wait; the slow turn takes 300


def _pending(held: dict[str, list[Future[dict[str, Any]]]]) -> int:
    return sum(not future.done() for futures in held.values() for future in futures)


def test_clients_waiting_on_slow_turns_starve_no_other_client(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    """Three clients each hold as many waits on a slow turn as they may; meanwhile another
    client runs a whole session, and each waiting client aborts and closes its own, while
    every other wait still waits (a wait holds no thread, and each client's calls run on
    threads of its own)."""
    server = make_server(pi_prefix)
    waiting = {f"waiter{i}": tokens.create(server.paths, f"waiter{i}")
               for i in range(WAITING_CLIENTS)}  # fmt: skip
    other = tokens.create(server.paths, "other")
    all_waits = WAITING_CLIENTS * CLIENT_CALLS
    with running_service(server) as service, ThreadPoolExecutor(all_waits) as pool:
        port = service.port

        def call(token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
            status, body = post(
                port, tool_call(tool, args), _headers(port, token), timeout=2 * WAIT
            )
            assert status == 200, body
            return _structured(body)

        def busy(token: str, args: dict[str, Any]) -> bool:
            body = call(token, "pi_turn_get", args)  # no wait: answered at once when admitted
            return not body["ok"] and body["error"]["code"] == "calls_busy"

        turns: dict[str, dict[str, Any]] = {}
        for name, token in waiting.items():
            sid = call(token, "pi_session_start", HOST_CODE)["session"]["sessionId"]
            turn = call(token, "pi_session_prompt", {"sessionId": sid, "message": "take-your-time"})
            turns[name] = {"sessionId": sid, "turnId": turn["turnId"]}
        held: dict[str, list[Future[dict[str, Any]]]] = {}
        for name, token in waiting.items():
            args = {**turns[name], "waitSeconds": WAIT}
            held[name] = [
                pool.submit(call, token, "pi_turn_get", args) for _ in range(CLIENT_CALLS)
            ]
        for name, token in waiting.items():  # each client's every wait is in progress
            _until(functools.partial(busy, token, turns[name]), "the waits are not all admitted")
        threads = _threads(service.proc.pid)
        assert _pending(held) == all_waits

        # Another client: a whole session, while every wait still waits.
        sid = call(other, "pi_session_start", HOST_CODE)["session"]["sessionId"]
        call(other, "pi_session_prompt", {"sessionId": sid, "message": "take-your-time"})
        assert [s["sessionId"] for s in call(other, "pi_session_list", {})["sessions"]] == [sid]
        assert call(other, "pi_session_abort", {"sessionId": sid})["aborted"] is True
        assert call(other, "pi_session_close", {"sessionId": sid})["ok"]
        assert _pending(held) == all_waits

        # A waiting client's abort and close pass its full cap; they end its own waits only.
        for index, (name, token) in enumerate(waiting.items()):
            own = {"sessionId": turns[name]["sessionId"]}
            assert call(token, "pi_session_abort", own)["aborted"] is True
            ended = [future.result(timeout=GONE_BOUND) for future in held[name]]
            assert {body["turn"]["status"] for body in ended} == {"aborted"}, ended
            assert _pending(held) == all_waits - (index + 1) * CLIENT_CALLS
            assert call(token, "pi_session_close", own)["session"]["state"] == "closed"
    print(f"\nservice threads while {all_waits} waits waited: {threads}")
    lines = server.audit_lines()
    outcomes = [ln["outcome"] for ln in lines if ln["action"] == "pi_turn_get"
                and ln.get("client") in waiting]  # fmt: skip
    assert outcomes.count("ok") >= all_waits, outcomes


def test_a_relay_whose_service_is_killed_answers_or_ends(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    """The service killed under a relay: the client's next request is answered with an
    error, or the relay ends (its client sees stdout close); it never waits forever."""
    server = make_server(pi_prefix)
    with running_service(server) as service:
        raw = RawServer(server)
        try:
            raw.initialize()
            assert raw.call("pi_capabilities_get", {})["ok"]
            service.proc.send_signal(signal.SIGKILL)
            service.proc.wait(30)
            raw.send({"id": "after", "method": "tools/call",
                      "params": {"name": "pi_capabilities_get", "arguments": {}}})  # fmt: skip
            assert _answer_or_end(raw, "after") in ("error", "ended")
        finally:
            raw.close()


def _answer_or_end(raw: RawServer, ident: str) -> str:
    """ "error" or "ok": the answer to request `ident`; "ended": stdout closed first."""
    deadline = time.monotonic() + GONE_BOUND
    while True:  # bounded by GONE_BOUND (each read waits at most until the deadline)
        try:
            frame = raw._next_frame(deadline)
        except AssertionError as exc:
            if "closed stdout" in str(exc):
                return "ended"
            raise
        if frame.get("id") == ident:
            failed = "error" in frame or frame["result"].get("isError")
            return "error" if failed else "ok"


def test_a_relay_signalled_mid_start_ends_and_leaves_no_session(
    make_server: MakeServer, pi_prefix: Path
) -> None:
    """SIGTERM while a start runs and the client keeps stdin open: the relay ends anyway,
    and the session that start makes is closed (by the relay, or by the service once
    the relay's token is gone)."""
    server = make_server(pi_prefix)
    with running_service(server):
        raw = RawServer(server)
        try:
            raw.initialize()
            raw.send({"id": "start", "method": "tools/call",
                      "params": {"name": "pi_session_start", "arguments": HOST_CODE}})  # fmt: skip
            relay = tokens.relay_name(raw.proc.pid)
            raw.proc.send_signal(signal.SIGTERM)
            assert raw.proc.wait(GONE_BOUND) == 0
            _until(lambda: relay not in tokens.load(server.paths), "the relay's token is left")
            _until(lambda: _started(server, relay), "the start did not end")
            _until(lambda: not processes_in(server.root / "ws"), "the session's agent still runs")
        finally:
            raw.close()


def _started(server: ServerEnv, client: str) -> bool:
    lines = server.audit_lines()
    return any(ln["action"] == "pi_session_start" and ln.get("client") == client for ln in lines)
