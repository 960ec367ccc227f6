"""A host that answers hostile: on the test host, a stand-in for Podman's API service on a
socket of its own (the url of a `[hosts.NAME]` table points at it). It pings as Podman
does, reports a version of 200,000 characters and answers everything else with an error
full of terminal controls; the host's own Podman is untouched."""

from __future__ import annotations

import contextlib
import json
import secrets
import shlex
from collections.abc import Iterator

from writerpool.config.hosts import HostConfig
from writerpool.proc import clean_env, spawn, stop
from writerpool.runtime.ssh import SshRoute

CONTROLS = "\x1b[2J\x1b]0;owned\x07\x1b[31mEVIL\r"
_SERVER = """
import json, os, socketserver, sys, threading
from http.server import BaseHTTPRequestHandler
EVIL = json.loads(sys.argv[2])
INFO = {"host": {"cgroupVersion": "v2", "security": {"rootless": True}},
        "version": {"Version": "9.9.9" + "A" * 200000, "APIVersion": "4.3.1"}}
class Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def send(self, code, data, kind="application/json"):
        self.send_response(code)
        for key, value in (("Content-Type", kind), ("Libpod-Api-Version", "4.3.1"),
                           ("Api-Version", "1.41"), ("Content-Length", str(len(data)))):
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        path = self.path.split("?")[0]
        if path.endswith("/_ping"):
            return self.send(200, b"OK", "text/plain")
        if path.endswith("/libpod/info"):
            return self.send(200, json.dumps(INFO).encode())
        self.close_connection = True
        self.send(500, json.dumps({"cause": EVIL, "message": EVIL, "response": 500}).encode())
    do_HEAD = do_POST = do_DELETE = do_GET
class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
server = Server(sys.argv[1], Answer)
threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
os.unlink(sys.argv[1])
"""


@contextlib.contextmanager
def hostile_podman(host: HostConfig) -> Iterator[HostConfig]:
    """`host` with its url pointing at the stand-in, for the life of the block."""
    ssh = SshRoute.from_config("th", host)
    socket = f"{host.target.socket.rsplit('/', 2)[0]}/wp-hostile-{secrets.token_hex(4)}.sock"
    words = ["python3", "-c", _SERVER, socket, json.dumps(CONTROLS)]
    proc = spawn([*ssh.argv("-T"), " ".join(shlex.quote(w) for w in words)], env=clean_env())
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        yield host.model_copy(update={"url": host.url.replace(host.target.socket, socket)})
    finally:
        stop(proc)
