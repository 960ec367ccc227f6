"""writerpool's calls to Podman's REST API, against a stand-in service on a Unix socket:
what is asked, how answers are read, and that no socket outlives a call, also when the
service is gone or hangs up (pytest turns an unclosed socket's warning into a failure)."""

from __future__ import annotations

import gc
import json
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from writerpool.runtime import podman_api
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.podman import PodmanApiUnavailable

Answer = tuple[int, object]
Answers = dict[tuple[str, str], Answer | list[Answer]]
Start = Callable[[Answers], "StandIn"]


class StandIn:
    """A Podman-like API service: answers by (method, path without query); a list of
    answers is given in turn, its last one from then on."""

    def __init__(self, path: Path, answers: Answers) -> None:
        self.seen: list[tuple[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                owner.seen.append((self.command, self.path))
                route = (self.command, urlsplit(self.path).path)
                given = answers.get(route, (404, {"message": "no such container"}))
                status, body = (given.pop(0) if len(given) > 1 else given[0]) if isinstance(
                    given, list) else given  # fmt: skip
                data = b"" if status in (204, 304) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                return

            def address_string(self) -> str:
                return "unix"

        self.server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Start]:
    made: list[StandIn] = []

    def start(answers: Answers) -> StandIn:
        made.append(StandIn(tmp_path / "api.sock", answers))
        return made[-1]

    yield start
    for one in made:
        one.close()


def no_socket_left() -> None:
    # An unclosed socket warns when it is collected; pytest fails the test on it.
    gc.collect()


def test_a_list_asks_by_label_and_reads_names_and_states(tmp_path: Path, service: Start) -> None:
    entries = [
        {"Id": "a" * 64, "Names": ["writerpool-w1"], "State": "running"},
        {"Id": "b" * 64, "Names": [], "State": "exited"},
        "not an entry",
    ]
    stand_in = service({("GET", "/v4.0.0/libpod/containers/json"): (200, entries)})
    host = LocalPodman(socket_path=tmp_path / "api.sock")
    found = host.containers("writerpool.writer", "w1")
    assert [(c.name, c.state) for c in found] == [("writerpool-w1", "running"), ("", "exited")]
    query = parse_qs(urlsplit(stand_in.seen[0][1]).query)
    assert query["all"] == ["true"]
    assert json.loads(query["filters"][0]) == {"label": ["writerpool.writer=w1"]}
    no_socket_left()


def test_leftovers_are_the_stored_only_containers_a_racing_list_is_asked_again(
    tmp_path: Path, service: Start
) -> None:
    entries = [
        {"Id": "a" * 64, "Names": ["writerpool-w1"], "State": "storage"},
        {"Id": "b" * 64, "Names": ["writerpool-w2"], "State": "running"},  # Podman's own
    ]
    raced = (500, {"cause": "container not known"})
    route = ("GET", "/v4.0.0/libpod/containers/json")
    stand_in = service({route: [raced, raced, (200, entries), raced]})
    host = LocalPodman(socket_path=tmp_path / "api.sock")
    assert [(c.name, c.state) for c in host.leftovers()] == [("writerpool-w1", "storage")]
    assert len(stand_in.seen) == 3
    assert parse_qs(urlsplit(stand_in.seen[0][1]).query)["external"] == ["true"]
    with pytest.raises(PodmanApiUnavailable):  # every list fails: after its tries
        host.leftovers()
    assert len(stand_in.seen) == 3 + podman_api.EXTERNAL_TRIES
    no_socket_left()


def test_a_container_only_the_storage_holds_is_removed_though_it_cannot_be_stopped(
    tmp_path: Path, service: Start
) -> None:
    ident = "e" * 64
    base = f"/v4.0.0/libpod/containers/{ident}"
    stand_in = service({("DELETE", base): (200, [{"Id": ident}])})  # stop: 404
    assert podman_api.remove(tmp_path / "api.sock", ident, 5) is True
    assert stand_in.seen[-1] == ("DELETE", f"{base}?force=true")
    no_socket_left()


def test_remove_stops_without_grace_then_removes(tmp_path: Path, service: Start) -> None:
    ident = "c" * 64
    base = f"/v4.0.0/libpod/containers/{ident}"
    stand_in = service({("POST", f"{base}/stop"): (304, None), ("DELETE", base): (200, [])})
    assert podman_api.remove(tmp_path / "api.sock", ident, 5) is True
    assert stand_in.seen == [("POST", f"{base}/stop?timeout=0"), ("DELETE", f"{base}?force=true")]
    no_socket_left()


def test_removing_a_container_that_is_gone_is_not_an_error(tmp_path: Path, service: Start) -> None:
    service({})
    LocalPodman(socket_path=tmp_path / "api.sock").remove("d" * 64)
    no_socket_left()


def test_a_refused_answer_is_podman_api_unavailable(tmp_path: Path, service: Start) -> None:
    service({("GET", "/v4.0.0/libpod/containers/json"): (500, {"message": "storage broke"})})
    with pytest.raises(PodmanApiUnavailable) as caught:
        LocalPodman(socket_path=tmp_path / "api.sock").containers("k", "v")
    assert caught.value.code == "podman_api_unavailable"
    no_socket_left()


def test_a_missing_service_leaves_no_socket_behind(tmp_path: Path) -> None:
    for _ in range(20):
        with pytest.raises(podman_api.ApiError):
            podman_api.list_by_label(tmp_path / "absent.sock", "k", "v", 1)
    no_socket_left()


def test_a_service_that_hangs_up_leaves_no_socket_behind(tmp_path: Path) -> None:
    path = tmp_path / "hangup.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def hang_up() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        for _ in range(5):
            with pytest.raises(podman_api.ApiError):
                podman_api.list_by_label(path, "k", "v", 2)
    finally:
        stop.set()
        listener.close()
        thread.join(5)
    no_socket_left()


def test_an_answer_over_the_cap_is_refused_and_leaves_no_socket_behind(
    tmp_path: Path, service: Start
) -> None:
    huge = [{"Id": "e" * 64, "Names": ["x" * 1024], "State": "running"}] * (
        podman_api.MAX_ANSWER_BYTES // 1024 + 16
    )
    service({("GET", "/v4.0.0/libpod/containers/json"): (200, huge)})
    with pytest.raises(podman_api.ApiError, match="larger than expected"):
        podman_api.list_by_label(tmp_path / "api.sock", "k", "v", 30)
    no_socket_left()
