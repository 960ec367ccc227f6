"""The in-writer egress forwarder: a loopback port relayed to the proxy's Unix socket.

On the host: the real script under python3, relaying to a test Unix socket server
(half-close both ways) and to a real provider proxy. In a container of the writer
image with `--network none`: the launcher starts the forwarder, and Python inside
reaches the scripted provider only through the bind-mounted socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REQUIRE
from writerpool.agent.scripted import Script, ScriptedProvider
from writerpool.config.caps import Caps
from writerpool.config.models import Config, Provider
from writerpool.config.providers import resolve_provider
from writerpool.egress.supervisor import EgressSession, EgressSupervisor
from writerpool.proc import run
from writerpool.runtime.image import DEFAULT_IMAGES_DIR, load_pin
from writerpool.runtime.podman import podman_env

FORWARDER = DEFAULT_IMAGES_DIR / "egress-forwarder"
REAL_KEY = "sk-forwarded-key"
CAPS = Caps(requests=100, bytes_up=10**7, bytes_down=10**7, concurrent=4)
SCRIPT = Script.model_validate({"default": [{"text": "answer through the forwarder"}]})


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="egf", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class EchoAfterEof:
    """A Unix socket server: reads a connection to its end, answers, then closes."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(b"got " + str(len(data)).encode() + b": " + data[:16])
                conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=10)


def start_forwarder(
    port: int, socket_path: Path, *args: str, stderr: int = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    env = {
        "PATH": os.environ["PATH"],
        "WRITERPOOL_EGRESS_PORT": str(port),
        "WRITERPOOL_EGRESS_SOCKET": str(socket_path),
    }
    return subprocess.Popen(
        ["/usr/bin/python3", str(FORWARDER), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
    )


@pytest.fixture
def forwarded(short_dir: Path) -> Iterator[tuple[int, Path]]:
    """A forwarder started the launcher's way (--background) and the socket it relays to."""
    port, socket_path = free_port(), short_dir / "egress.sock"
    # stderr is not a pipe: the serving child keeps it open, as in the launcher.
    parent = start_forwarder(port, socket_path, "--background", stderr=subprocess.DEVNULL)
    try:
        assert parent.wait(timeout=10) == 0
        yield port, socket_path  # the port accepts now: the parent returned only then
    finally:
        # The serving child stays in the parent's new session: end the whole group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGTERM)


def exchange(port: int, payload: bytes, half_close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(payload)
        if half_close:
            conn.shutdown(socket.SHUT_WR)  # the answer must still come back
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        return answer


def test_a_connection_is_relayed_both_ways_with_half_close(
    forwarded: tuple[int, Path],
) -> None:
    port, socket_path = forwarded
    server = EchoAfterEof(socket_path)
    try:
        assert exchange(port, b"hello") == b"got 5: hello"
        big = os.urandom(3 * 1024 * 1024)
        assert exchange(port, big) == b"got 3145728: " + big[:16]
        answers: list[bytes] = []
        threads = [
            threading.Thread(target=lambda i=i: answers.append(exchange(port, b"x" * i)))
            for i in range(1, 9)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(answers) == sorted(f"got {i}: {'x' * i}".encode() for i in range(1, 9))
    finally:
        server.close()


def pipes_of_group(group: int) -> int:
    """Pipe descriptors held by the processes of a process group (the serving child)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        count += sum(link.startswith("pipe:") for link in links)
    return count


def test_a_connection_moves_through_a_kernel_pipe_each_way(short_dir: Path) -> None:
    """While a connection is open its bytes go through two pipes (splice), none before."""
    port, socket_path = free_port(), short_dir / "egress.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(socket_path))
    server.listen()
    parent = start_forwarder(port, socket_path, "--background", stderr=subprocess.DEVNULL)
    try:
        assert parent.wait(timeout=10) == 0
        idle = pipes_of_group(parent.pid)  # the serving child is in the parent's group
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            inner, _ = server.accept()
            with inner:
                conn.sendall(b"ping")
                assert inner.recv(4) == b"ping"
                inner.sendall(b"pong")
                assert conn.recv(4) == b"pong"
                assert pipes_of_group(parent.pid) == idle + 4  # two ends, two directions
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGTERM)
        server.close()


def test_without_its_socket_a_connection_is_closed_and_the_forwarder_serves_on(
    forwarded: tuple[int, Path],
) -> None:
    port, socket_path = forwarded
    try:
        answer = exchange(port, b"nobody there")
    except ConnectionResetError:
        answer = b""  # aborted: the client sees the connection end, never a half answer
    assert answer == b""
    server = EchoAfterEof(socket_path)
    try:
        assert exchange(port, b"now") == b"got 3: now"
    finally:
        server.close()


def test_it_refuses_to_start_without_its_variables_or_port() -> None:
    done = subprocess.run(
        ["/usr/bin/python3", str(FORWARDER)],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 2 and b"WRITERPOOL_EGRESS_PORT" in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start_forwarder(port, Path("/nonexistent.sock"), "--background")
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and b"cannot listen" in err


def proxied_session(
    short_dir: Path, provider: ScriptedProvider, host: EgressSupervisor
) -> EgressSession:
    config = Config(providers={"local": Provider(base_url=provider.base_url(), api_key_env="K")})
    upstream = resolve_provider(config, "local")
    assert upstream is not None
    return host.open(
        session="s1",
        writer="demo-w1",
        socket_path=short_dir / "w" / "egress.sock",
        upstream=upstream,
        credential=REAL_KEY,
        caps=CAPS,
    )


def test_the_forwarder_carries_a_streamed_completion_through_the_proxy(short_dir: Path) -> None:
    port = free_port()
    with ScriptedProvider(SCRIPT, host="127.0.0.1") as provider:
        host = EgressSupervisor()
        try:
            proxy = proxied_session(short_dir, provider, host)
            forwarder = start_forwarder(port, proxy.socket_path)
            try:
                body = json.dumps(
                    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
                ).encode()
                request = (
                    b"POST /p/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Authorization: Bearer " + proxy.token.encode() + b"\r\n"
                    b"Connection: close\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
                answer = _retry_exchange(port, request)
            finally:
                forwarder.terminate()
                forwarder.communicate(timeout=10)
        finally:
            host.close()
        assert answer.startswith(b"HTTP/1.1 200")
        assert b"data: [DONE]" in answer
        assert provider.last_auth == {"authorization": f"Bearer {REAL_KEY}"}


def _retry_exchange(port: int, payload: bytes) -> bytes:
    # Started in the foreground here, the forwarder may not listen yet.
    for _ in range(200):
        try:
            # No half-close: an HTTP server may take one for a client gone away.
            return exchange(port, payload, half_close=False)
        except ConnectionRefusedError:
            threading.Event().wait(0.02)
    raise AssertionError("the forwarder never listened")


INSIDE = r"""
import http.client, json, os, socket, sys
port = int(os.environ["WRITERPOOL_EGRESS_PORT"])
body = json.dumps({"model": "m", "stream": True,
                   "messages": [{"role": "user", "content": "hi"}]})
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
conn.request("POST", "/p/chat/completions", body=body,
             headers={"Authorization": "Bearer " + sys.argv[1],
                      "Content-Type": "application/json"})
response = conn.getresponse()
text = response.read().decode()
wrong = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
wrong.request("GET", "/p/files", headers={"Authorization": "Bearer " + sys.argv[1]})
refused = wrong.getresponse().status
interfaces = sorted(name for _, name in socket.if_nameindex())
print(json.dumps({"status": response.status, "done": "data: [DONE]" in text,
                  "answer": "answer through the forwarder" in "".join(
                      json.loads(line[6:])["choices"][0]["delta"].get("content", "")
                      for line in text.splitlines()
                      if line.startswith("data: {") and '"choices": [{' in line),
                  "refused": refused, "interfaces": interfaces}))
"""


@pytest.mark.podman
@pytest.mark.image
def test_inside_a_writer_without_network_the_launcher_forwards_to_the_proxy(
    short_dir: Path, image_pin: Path
) -> None:
    if shutil.which("podman") is None:
        if REQUIRE:
            pytest.fail("podman is missing")
        pytest.skip("podman is missing")
    from writerpool.config.paths import Paths

    pin = load_pin(Paths.from_env())
    assert pin is not None
    name = f"writerpool-test-egress-{uuid.uuid4().hex[:8]}"
    with ScriptedProvider(SCRIPT, host="127.0.0.1") as provider:
        host = EgressSupervisor()
        try:
            proxy = proxied_session(short_dir, provider, host)
            argv = [
                "podman",
                "run",
                "--rm",
                "-i",
                "--name",
                name,
                "--label",
                "io.writerpool.test=egress-forwarder",
                "--pull=never",
                "--network",
                "none",
                "--userns=keep-id",
                "--read-only",
                "--cap-drop=all",
                "--security-opt=no-new-privileges",
                "--tmpfs",
                "/tmp",
                "-v",
                f"{proxy.socket_path.parent}:/egress",
                "-e",
                "WRITERPOOL_EGRESS_PORT=18089",
                "-e",
                "WRITERPOOL_EGRESS_SOCKET=/egress/egress.sock",
                pin.image_id,
                # The forwarder as pi's launcher runs it: PID 1, serving while its child
                # (here the probe instead of pi) runs, and ending with it.
                "/usr/bin/python3",
                "/usr/local/lib/writerpool/egress-forwarder",
                "--supervise",
                "/usr/bin/python3",
                "-c",
                INSIDE,
                proxy.token,
            ]
            done = run(argv, env=podman_env(), timeout=180, check=False)
        finally:
            run(["podman", "rm", "-f", "--", name], env=podman_env(), timeout=60, check=False)
            host.close()
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        seen = json.loads(done.out.strip().splitlines()[-1])
        assert seen == {
            "status": 200,
            "done": True,
            "answer": True,
            "refused": 403,
            "interfaces": ["lo"],
        }
        assert provider.last_auth == {"authorization": f"Bearer {REAL_KEY}"}
        assert not proxy.socket_path.exists()


CHILD = """
import os, socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as conn:
    conn.sendall(b"through the supervisor"); conn.shutdown(socket.SHUT_WR)
    answer = conn.recv(65536)
parent = os.getppid()
try:
    os.listdir(f"/proc/{parent}/fd")
    reach = "open"
except PermissionError:
    reach = "denied"
print(answer.decode(), reach, os.stat(f"/proc/{parent}/fd").st_uid, sep="|", flush=True)
sys.exit(7)
"""


def test_supervise_starts_the_child_with_the_channel_and_holds_none_of_it(
    short_dir: Path,
) -> None:
    port, socket_path = free_port(), short_dir / "egress.sock"
    echo = EchoAfterEof(socket_path)
    env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": str(port),
           "WRITERPOOL_EGRESS_SOCKET": str(socket_path)}  # fmt: skip
    try:
        done = subprocess.run(
            ["/usr/bin/python3", str(FORWARDER), "--supervise",
             sys.executable, "-c", CHILD, str(port)],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )  # fmt: skip
    finally:
        echo.close()
    # The child's stdout is the channel; its status is the supervisor's.
    assert done.returncode == 7, done.stderr
    answer, reach, owner = done.stdout.decode().strip().split("|")
    assert answer == "got 22: through the supe"  # its first 16 bytes
    # Not dumpable: its /proc/PID/fd is root's, closed to its own user's processes.
    assert (reach, owner) == ("denied", "0") or os.getuid() == 0


DRIVER = """
import os, socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as conn:
    conn.sendall(b"from a script"); conn.shutdown(socket.SHUT_WR)
    answer = conn.recv(65536)
# The forwarder's listening sockets are not the script's to hold.
sockets = []
for fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
            sockets.append(fd)
    except FileNotFoundError:  # the listing's own descriptor
        pass
flags = (sys.flags.isolated, sys.flags.no_site)
print(answer.decode(), __name__, sys.argv[1:], len(sockets), flags, sep="|", flush=True)
if sys.argv[2] == "fail":
    raise RuntimeError("the script's own failure")
"""


@pytest.mark.parametrize("how", ["exit", "fail"])
def test_supervise_python_runs_the_script_in_a_fork_as_its_interpreter_would(
    short_dir: Path, tmp_path: Path, how: str
) -> None:
    port, socket_path = free_port(), short_dir / "egress.sock"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER + ("" if how == "fail" else "sys.exit(5)\n"))
    echo = EchoAfterEof(socket_path)
    env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": str(port),
           "WRITERPOOL_EGRESS_SOCKET": str(socket_path)}  # fmt: skip
    try:
        done = subprocess.run(
            ["/usr/bin/python3", "-I", "-S", str(FORWARDER), "--supervise-python",
             str(script), str(port), how],
            env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
        )  # fmt: skip
    finally:
        echo.close()
    answer, name, args, sockets, flags = done.stdout.decode().strip().split("|")
    assert (answer, name, args) == ("got 13: from a script", "__main__", f"['{port}', '{how}']")
    assert (sockets, flags) == ("0", "(1, 1)")
    if how == "fail":  # a traceback and status 1, as from `python3 -I -S SCRIPT`
        assert done.returncode == 1
        assert b"RuntimeError: the script's own failure" in done.stderr
    else:
        assert done.returncode == 5, done.stderr


def test_supervise_without_a_port_to_listen_on_fails_with_125(short_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = {"PATH": os.environ["PATH"], "WRITERPOOL_EGRESS_PORT": str(taken.getsockname()[1]),
               "WRITERPOOL_EGRESS_SOCKET": str(short_dir / "s.sock")}  # fmt: skip
        done = subprocess.run(
            ["/usr/bin/python3", str(FORWARDER), "--supervise", "/bin/echo", "never"],
            env=env, capture_output=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 125 and done.stdout == b""
