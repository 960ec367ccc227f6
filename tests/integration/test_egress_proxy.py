"""The per-session provider proxy against the scripted provider on loopback.

A client on the session's Unix socket (as the in-writer forwarder connects) sends the
requests pi sends; the scripted provider plays the real provider and records which
key reached it. Plain HTTP and HTTPS with a test CA.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import procs
from tests.support.egress import UnixHTTPConnection, make_ca, server_context
from writerpool.agent.scripted import Script, ScriptedProvider
from writerpool.config.caps import Caps
from writerpool.config.models import Config, Provider
from writerpool.config.providers import ResolvedProvider, resolve_provider
from writerpool.egress import model
from writerpool.egress.model import EgressRecord
from writerpool.egress.proxy import AUDIT_PAST_CAP
from writerpool.egress.sockets import remove_stale_socket
from writerpool.egress.supervisor import EgressSession, EgressSupervisor
from writerpool.egress.worker import ADDRESS_SPACE
from writerpool.errors import WriterpoolError

REAL_KEY = "sk-real-key-0123456789"
SCRIPT = Script.model_validate(
    {
        "scripts": [
            {"match": "slow", "steps": [{"text": "s" * 400, "delay_seconds": 20}]},
            {"match": "pause", "steps": [{"text": "p" * 40, "delay_seconds": 3}]},
        ],
        "default": [{"text": "the scripted answer, streamed in pieces"}],
    }
)
ROOMY = Caps(requests=1000, bytes_up=10**8, bytes_down=10**8, concurrent=8)


class Records:
    """The audit callable: records kept in order, waited for by count."""

    def __init__(self) -> None:
        self.items: list[EgressRecord] = []
        self._cond = threading.Condition()

    def __call__(self, record: EgressRecord) -> None:
        with self._cond:
            self.items.append(record)
            self._cond.notify_all()

    def wait(self, count: int) -> list[EgressRecord]:
        with self._cond:
            self._cond.wait_for(lambda: len(self.items) >= count, timeout=30)
            return list(self.items)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="egi", dir="/tmp"))
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", "--", str(path)], check=False)


@pytest.fixture
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(SCRIPT, host="127.0.0.1") as server:
        yield server


@pytest.fixture
def records() -> Records:
    return Records()


@pytest.fixture
def host(records: Records) -> Iterator[EgressSupervisor]:
    egress = EgressSupervisor(audit=records)
    try:
        yield egress
    finally:
        egress.close()


def upstream_of(base_url: str, api: str = "openai-completions") -> ResolvedProvider:
    config = Config(
        providers={
            "local": Provider(
                base_url=base_url,
                api=api,
                api_key_env="LOCAL_KEY",
            )
        }
    )
    resolved = resolve_provider(config, "local")
    assert resolved is not None
    return resolved


def open_session(
    host: EgressSupervisor,
    short_dir: Path,
    provider: ScriptedProvider,
    name: str = "s1",
    caps: Caps = ROOMY,
    api: str = "openai-completions",
) -> EgressSession:
    return host.open(
        session=name,
        writer="demo-w1",
        socket_path=short_dir / name / "egress.sock",
        upstream=upstream_of(provider.base_url(), api),
        credential=REAL_KEY,
        caps=caps,
    )


def chat_body(text: str = "hello", stream: bool = True) -> bytes:
    return json.dumps(
        {
            "model": "scripted-model",
            "stream": stream,
            "messages": [{"role": "user", "content": text}],
        }
    ).encode()


def request(
    proxy: EgressSession,
    method: str = "POST",
    path: str = "/p/chat/completions",
    body: bytes | None = None,
    token: str | None = "",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    conn = UnixHTTPConnection(proxy.socket_path)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token or proxy.token}"
    if body is None and method == "POST":
        body = chat_body()
    if body is not None:
        sent["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_the_right_token_passes_and_only_the_real_key_reaches_the_provider(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    proxy = open_session(host, short_dir, provider)
    status, body = request(proxy, headers={"X-Api-Key": "leak", "Cookie": "c=1"})
    assert status == 200
    assert b"the scripted answer" in b"".join(
        json.loads(line[6:])["choices"][0]["delta"].get("content", "").encode()
        for line in body.splitlines()
        if line.startswith(b"data: {") and b'"choices": [{' in line
    )
    assert body.rstrip().endswith(b"data: [DONE]")
    assert provider.last_auth == {"authorization": f"Bearer {REAL_KEY}"}
    (record,) = records.wait(1)
    assert (record.session, record.writer, record.method) == ("s1", "demo-w1", "POST")
    assert (record.path, record.status, record.outcome) == ("/chat/completions", 200, model.OK)
    assert record.bytes_up == len(chat_body()) and record.bytes_down == len(body)


def test_the_key_goes_in_the_api_kinds_own_header(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider, api="anthropic-messages")
    status, _ = request(
        proxy,
        path="/p/v1/messages",
        token=None,
        headers={"x-api-key": proxy.token, "Authorization": "Bearer other"},
    )
    assert status == 404  # the scripted provider serves chat completions only
    assert provider.last_auth == {"x-api-key": REAL_KEY}
    assert provider.last_path == "/v1/v1/messages"  # base URL path + the route


def test_a_missing_token_is_401_a_wrong_one_403_and_neither_reaches_the_provider(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    proxy = open_session(host, short_dir, provider)
    assert request(proxy, token=None)[0] == 401
    assert request(proxy, token="not-the-token")[0] == 403
    assert request(proxy, token=None, headers={"Authorization": f"Basic {proxy.token}"})[0] == 403
    assert request(proxy, token=None, headers={"X-Api-Key": proxy.token})[0] == 401
    assert provider.request_count == 0 and provider.last_path is None
    outcomes = [r.outcome for r in records.wait(4)]
    assert outcomes == [
        model.UNAUTHORIZED,
        model.FORBIDDEN_TOKEN,
        model.FORBIDDEN_TOKEN,
        model.UNAUTHORIZED,
    ]


def test_a_token_that_is_not_utf8_is_refused_and_audited_as_wrong(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    proxy = open_session(host, short_dir, provider)
    assert request(proxy, token="\xff\xfe")[0] == 403
    assert request(proxy, token=None, headers={"X-Api-Key": "\xff"})[0] == 401
    assert [r.outcome for r in records.wait(2)] == [model.FORBIDDEN_TOKEN, model.UNAUTHORIZED]
    assert request(proxy)[0] == 200


def test_requests_the_proxy_cannot_parse_get_400_and_leave_the_servers_stderr_alone(
    host: EgressSupervisor,
    short_dir: Path,
    provider: ScriptedProvider,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The egress process writes on the server's own stderr: an agent's malformed
    requests, however many, must not reach it (aiohttp logs each with a traceback)."""
    proxy = open_session(host, short_dir, provider)
    heads = [
        b"GET /p/" + b"A" * 7000 + b"\xff HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /p/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
        b"Content-Length: 2\r\n\r\nab",
        b"POST /p/chat/completions HTTP/1.1\r\nHost: x\r\nX-A: a\nb\r\n\r\n",
        b"POST /p/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ]
    answers = []
    for n in range(60):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(str(proxy.socket_path))
            conn.sendall(heads[n % len(heads)])
            answers.append(conn.recv(64))
    assert all(b" 400 " in answer.split(b"\r\n")[0] for answer in answers), set(answers)
    assert request(proxy)[0] == 200
    err = capfd.readouterr().err
    assert len(err) < 2000, err[:2000]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/p/responses"),
        ("GET", "/p/chat/completions"),
        ("DELETE", "/p/models"),
        ("POST", "/chat/completions"),
        ("POST", "/p/../p/chat/completions"),
        ("POST", "/p/%63hat/completions"),
        ("POST", "/p//chat/completions"),
        ("POST", "/p/chat/completions/"),
    ],
)
def test_anything_but_the_kinds_routes_is_403(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, method: str, path: str
) -> None:
    proxy = open_session(host, short_dir, provider)
    status, _ = request(proxy, method=method, path=path, body=chat_body())
    assert status == 403
    assert provider.last_path is None


def test_a_key_query_parameter_is_stripped_and_other_parameters_kept(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    proxy = open_session(host, short_dir, provider)
    status, _ = request(proxy, method="GET", path="/p/models?key=leak&alt=sse")
    assert status == 404  # the scripted provider knows no query strings
    assert provider.last_path == "/v1/models?alt=sse"
    (record,) = records.wait(1)
    assert record.path == "/models"


def test_past_the_request_cap_429_and_another_session_is_unaffected(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    caps = Caps(requests=2, bytes_up=10**6, bytes_down=10**6, concurrent=4)
    first = open_session(host, short_dir, provider, "s1", caps)
    assert [request(first)[0] for _ in range(3)] == [200, 200, 429]
    second = open_session(host, short_dir, provider, "s2", caps)
    assert request(second)[0] == 200
    assert [r.outcome for r in records.wait(4)].count(model.CAP_REQUESTS) == 1


def test_past_the_upload_cap_429_whether_declared_or_streamed(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    caps = Caps(requests=100, bytes_up=1000, bytes_down=10**6, concurrent=4)
    proxy = open_session(host, short_dir, provider, caps=caps)
    assert request(proxy)[0] == 200
    big = chat_body("x" * 2000)
    assert request(proxy, body=big)[0] == 429  # Content-Length says it at once
    conn = UnixHTTPConnection(proxy.socket_path)
    conn.request(
        "POST",
        "/p/chat/completions",
        body=iter([big[:500], big[500:]]),
        headers={"Authorization": f"Bearer {proxy.token}"},
        encode_chunked=True,
    )
    assert conn.getresponse().status == 429  # no length: counted while streaming up
    conn.close()
    assert [r.outcome for r in records.wait(3)][1:] == [model.CAP_BYTES_UP, model.CAP_BYTES_UP]
    assert provider.request_count == 1
    assert request(open_session(host, short_dir, provider, "s2", caps))[0] == 200


def test_past_the_download_cap_the_stream_is_cut_and_the_next_request_429(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    caps = Caps(requests=100, bytes_up=10**6, bytes_down=300, concurrent=4)
    proxy = open_session(host, short_dir, provider, caps=caps)
    conn = UnixHTTPConnection(proxy.socket_path)
    conn.request(
        "POST",
        "/p/chat/completions",
        body=chat_body(),
        headers={"Authorization": f"Bearer {proxy.token}"},
    )
    response = conn.getresponse()
    assert response.status == 200
    with pytest.raises(http.client.IncompleteRead):
        response.read()  # cut: never mistaken for a whole answer
    conn.close()
    assert request(proxy)[0] == 429
    outcomes = [r.outcome for r in records.wait(2)]
    assert outcomes == [model.CAP_BYTES_DOWN, model.CAP_BYTES_DOWN]
    assert records.items[0].bytes_down <= 300


def test_past_the_concurrency_cap_429_while_a_stream_is_in_flight(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    caps = Caps(requests=100, bytes_up=10**6, bytes_down=10**6, concurrent=1)
    proxy = open_session(host, short_dir, provider, caps=caps)
    conn = UnixHTTPConnection(proxy.socket_path)
    conn.request(
        "POST",
        "/p/chat/completions",
        body=chat_body("pause"),
        headers={"Authorization": f"Bearer {proxy.token}"},
    )
    response = conn.getresponse()
    assert response.status == 200
    response.readline()  # the first event: the stream is in flight
    assert request(proxy)[0] == 429
    assert response.read().rstrip().endswith(b"data: [DONE]")
    conn.close()
    assert request(proxy)[0] == 200  # the slot is free again
    assert [r.outcome for r in records.wait(3)] == [model.CAP_CONCURRENT, model.OK, model.OK]


def test_events_arrive_while_the_provider_is_still_streaming(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider)
    conn = UnixHTTPConnection(proxy.socket_path)
    conn.request(
        "POST",
        "/p/chat/completions",
        body=chat_body("slow"),
        headers={"Authorization": f"Bearer {proxy.token}"},
    )
    response = conn.getresponse()
    first = response.readline()
    assert first.startswith(b"data: {")
    # The provider is told to end its stream now, before its last event: a proxy that
    # buffered until the provider finished could not have shown the first event yet.
    provider.stopping.set()
    rest = response.read()
    conn.close()
    assert b"[DONE]" not in rest


def test_audit_records_never_hold_the_key_or_the_token(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    proxy = open_session(host, short_dir, provider)
    request(proxy)
    request(proxy, token="wrong")
    request(proxy, method="GET", path=f"/p/models?key={REAL_KEY}")
    request(proxy, path=f"/p/{proxy.token}")
    text = repr(records.wait(4))
    assert REAL_KEY not in text and proxy.token not in text


def test_stop_removes_the_socket_and_is_idempotent(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    proxy = open_session(host, short_dir, provider)
    assert request(proxy)[0] == 200
    proxy.stop()
    proxy.stop()
    assert not proxy.socket_path.exists()
    with pytest.raises(OSError):
        request(proxy)
    again = open_session(host, short_dir, provider)  # the same path serves a new session
    assert request(again)[0] == 200 and again.token != proxy.token


def test_stop_cancels_a_request_in_flight(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    proxy = open_session(host, short_dir, provider)
    conn = UnixHTTPConnection(proxy.socket_path)
    conn.request(
        "POST",
        "/p/chat/completions",
        body=chat_body("slow"),
        headers={"Authorization": f"Bearer {proxy.token}"},
    )
    response = conn.getresponse()
    response.readline()
    proxy.stop()
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        response.read()
    conn.close()
    assert records.wait(1)[0].outcome == model.CANCELLED
    assert not proxy.socket_path.exists()


def test_close_stops_every_session(
    short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    egress = EgressSupervisor(audit=records)
    proxies = [open_session(egress, short_dir, provider, name) for name in ("a", "b")]
    egress.close()
    assert not any(p.socket_path.exists() for p in proxies)


def test_an_unreachable_provider_is_502(
    host: EgressSupervisor, short_dir: Path, records: Records
) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = host.open(
        session="s1",
        writer=None,
        socket_path=short_dir / "egress.sock",
        upstream=upstream_of(f"http://127.0.0.1:{port}/v1"),
        credential=REAL_KEY,
        caps=ROOMY,
    )
    status, body = request(proxy)
    assert status == 502 and REAL_KEY.encode() not in body
    assert records.wait(1)[0].outcome == model.UPSTREAM_FAILED


def test_remove_stale_socket_after_the_holder_was_killed(
    host: EgressSupervisor, short_dir: Path
) -> None:
    path = short_dir / "held.sock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); "
            "s.listen(); print('ready', flush=True); time.sleep(600)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        assert remove_stale_socket(path) is False  # alive
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert path.exists()
    assert remove_stale_socket(path) is True
    assert not path.exists()


@pytest.fixture
def tls_provider(short_dir: Path) -> Iterator[tuple[ScriptedProvider, Path, Path]]:
    ca, cert, key = make_ca(short_dir / "pki", "good")
    other_ca, _, _ = make_ca(short_dir / "pki", "other")
    with ScriptedProvider(SCRIPT, host="127.0.0.1", tls=server_context(cert, key)) as server:
        yield server, ca, other_ca


def test_an_https_provider_is_verified_with_the_hosts_ca_variables(
    host: EgressSupervisor,
    short_dir: Path,
    tls_provider: tuple[ScriptedProvider, Path, Path],
    records: Records,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca, other_ca = tls_provider
    assert server.base_url().startswith("https://127.0.0.1:")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    good = open_session(host, short_dir, server, "good")
    status, body = request(good)
    assert status == 200 and body.rstrip().endswith(b"data: [DONE]")
    assert server.last_auth == {"authorization": f"Bearer {REAL_KEY}"}
    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca))
    wrong = open_session(host, short_dir, server, "wrong")
    assert request(wrong)[0] == 502
    assert [r.outcome for r in records.wait(2)] == [model.OK, model.UPSTREAM_FAILED]
    assert server.request_count == 1


def test_node_extra_ca_certs_is_honoured_too(
    host: EgressSupervisor,
    short_dir: Path,
    tls_provider: tuple[ScriptedProvider, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca, _ = tls_provider
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(ca))
    assert request(open_session(host, short_dir, server))[0] == 200


def test_a_closed_host_opens_nothing(short_dir: Path, provider: ScriptedProvider) -> None:
    egress = EgressSupervisor()
    proxy = open_session(egress, short_dir, provider)
    assert request(proxy)[0] == 200
    egress.close()
    egress.close()
    proxy.stop()  # after close: nothing left to do
    with pytest.raises(WriterpoolError) as err:
        open_session(egress, short_dir, provider, "later")
    assert err.value.code == "egress_failed"
    assert not (short_dir / "later").exists()


def test_refused_requests_count_and_the_audit_past_the_cap_is_bounded(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider, records: Records
) -> None:
    caps = Caps(requests=2, bytes_up=10**6, bytes_down=10**6, concurrent=4)
    proxy = open_session(host, short_dir, provider, caps=caps)
    statuses = [request(proxy, token="wrong")[0] for _ in range(2)]
    statuses += [request(proxy)[0] for _ in range(AUDIT_PAST_CAP + 10)]
    assert statuses == [403, 403] + [429] * (AUDIT_PAST_CAP + 10)
    outcomes = [r.outcome for r in records.wait(2 + AUDIT_PAST_CAP)]
    proxy.stop()
    assert len(records.items) == 2 + AUDIT_PAST_CAP  # handed off before each response was sent
    assert outcomes == [model.FORBIDDEN_TOKEN] * 2 + [model.CAP_REQUESTS] * AUDIT_PAST_CAP
    assert provider.request_count == 0


def _fork_servers() -> list[procs.Running]:
    """This process's egress fork servers."""
    return [p for p in procs.mine()
            if p.parent == os.getpid() and b"writerpool.egress.worker" in p.argv]  # fmt: skip


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _address_space(pid: int) -> str:
    [line] = [x for x in Path(f"/proc/{pid}/limits").read_text().splitlines()
              if x.startswith("Max address space")]  # fmt: skip
    return line.split()[3]


def _until_dead(pid: int) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, f"process {pid} did not end"
        time.sleep(0.01)


def test_each_session_is_a_confined_fork_of_one_fork_server_which_holds_nothing(
    host: EgressSupervisor, short_dir: Path, provider: ScriptedProvider
) -> None:
    first = open_session(host, short_dir, provider)
    second = open_session(host, short_dir, provider, name="s2")
    [server] = _fork_servers()
    assert first.pid != second.pid
    assert _parent(first.pid) == _parent(second.pid) == server.pid
    assert request(first)[0] == request(second)[0] == 200
    # Each child lowered its own limits; the fork server never read a spec.
    assert _address_space(first.pid) == _address_space(second.pid) == str(ADDRESS_SPACE)
    assert _address_space(server.pid) == "unlimited"
    assert REAL_KEY.encode() not in Path(f"/proc/{server.pid}/environ").read_bytes()
    first.stop()
    assert not first.alive and second.alive and request(second)[0] == 200
    host.close()  # the sessions end, then the fork server, which has reaped them
    for pid in (first.pid, second.pid, server.pid):
        assert not Path(f"/proc/{pid}").exists(), pid


def test_a_fork_server_killed_by_another_hand_is_named_and_its_sessions_go_on(
    host: EgressSupervisor,
    short_dir: Path,
    provider: ScriptedProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = open_session(host, short_dir, provider)
    [server] = _fork_servers()
    os.kill(server.pid, signal.SIGKILL)
    _until_dead(server.pid)  # a zombie of this process now, not yet reaped
    with caplog.at_level(logging.WARNING, logger="writerpool.egress.supervisor"):
        second = open_session(host, short_dir, provider, name="s2")
    assert f"the fork server (pid {server.pid}) ended on its own" in caplog.text
    [again] = _fork_servers()
    assert again.pid != server.pid and _parent(second.pid) == again.pid
    assert request(first)[0] == request(second)[0] == 200


def test_a_changed_environment_forks_from_a_new_fork_server(
    host: EgressSupervisor,
    short_dir: Path,
    provider: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fork server started before the server's CA variables changed holds the old
    ones (and trust anchors loaded from them): the next session forks from a new one."""
    first = open_session(host, short_dir, provider)
    [old] = _fork_servers()
    monkeypatch.setenv("SSL_CERT_DIR", str(short_dir))
    second = open_session(host, short_dir, provider, name="s2")
    third = open_session(host, short_dir, provider, name="s3")
    # The old one forks no more, and stays to reap its child until the host closes.
    [new] = [p for p in _fork_servers() if p.pid != old.pid]
    assert _parent(second.pid) == _parent(third.pid) == new.pid
    assert _parent(first.pid) == old.pid
    assert f"SSL_CERT_DIR={short_dir}".encode() in Path(f"/proc/{new.pid}/environ").read_bytes()
    assert request(first)[0] == request(second)[0] == request(third)[0] == 200
    host.close()
    for pid in (first.pid, second.pid, third.pid, old.pid, new.pid):
        assert not Path(f"/proc/{pid}").exists(), pid
