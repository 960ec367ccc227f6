"""Packages that run code when they are built, for tests that show nothing builds them.

`evil` is a real source package: its `setup.py` writes a marker file, and its in-tree
build backend (no build requirements, so pip builds it with no index) runs that
`setup.py`. A test first lets plain pip build it (the marker appears: the trap is live),
then shows that `image derive` never gets that far. Served by the loopback registry
fixture (tests/support/registry.py) as a PEP 503 index of files.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path

EVIL = "evil"
EVIL_VERSION = "1.0"
SDIST = f"{EVIL}-{EVIL_VERSION}.tar.gz"

_BACKEND = """\
import pathlib, runpy
runpy.run_path(str(pathlib.Path(__file__).with_name("setup.py")))
"""


def make_marker_package(folder: Path, marker: Path) -> Path:
    """folder/evil: building it (any way pip can) writes marker."""
    package = folder / EVIL
    package.mkdir(parents=True)
    (package / "setup.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('setup.py ran')\n"
        f"from setuptools import setup\nsetup(name={EVIL!r}, version={EVIL_VERSION!r})\n"
    )
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    (package / "backend.py").write_text(_BACKEND)
    (package / "PKG-INFO").write_text(
        f"Metadata-Version: 2.1\nName: {EVIL}\nVersion: {EVIL_VERSION}\n"
    )
    return package


def sdist_of(package: Path) -> bytes:
    """The package as a source distribution (evil-1.0.tar.gz)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(package, f"{EVIL}-{EVIL_VERSION}")
    return out.getvalue()


def index_routes(files: dict[str, bytes]) -> dict[str, tuple[str, bytes]]:
    """A PEP 503 index of files ({file name: bytes}) for the registry fixture:
    /simple/PROJECT/ links each file with its sha256, /files/NAME serves it."""
    projects: dict[str, list[str]] = {}
    routes: dict[str, tuple[str, bytes]] = {}
    for name, data in files.items():
        project = name.split("-")[0].lower()
        sha = hashlib.sha256(data).hexdigest()
        projects.setdefault(project, []).append(f'<a href="/files/{name}#sha256={sha}">{name}</a>')
        routes[f"/files/{name}"] = ("application/octet-stream", data)
    for project, links in projects.items():
        page = f"<html><body>{''.join(links)}</body></html>".encode()
        routes[f"/simple/{project}/"] = ("text/html", page)
    return routes


def plain_pip_download(dest: Path, *args: str, env: dict[str, str] | None = None) -> int:
    """The host's pip as the unguarded `image derive` ran it (binary-only on the command
    line): the control that shows a case really builds the package."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
         "--no-cache-dir", "--only-binary=:all:", "--dest", str(dest), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=dest.parent,
    )  # fmt: skip
    return done.returncode
