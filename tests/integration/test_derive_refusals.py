"""`image derive --requirements` refuses, before pip starts, every requirements file that
would make the host's pip build a package: `--no-binary :all:`, `name @ file:///dir`,
`name @ http://…/x.tar.gz`. The package is real (its setup.py writes a marker), and the
same file given to plain pip the way the unguarded derive ran it does build it: the
marker appears there, and never through writerpool. The writer image is pinned, so a
derive that let such a file through would reach pip."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, wp
from tests.support.packages import (
    EVIL,
    EVIL_VERSION,
    SDIST,
    index_routes,
    make_marker_package,
    plain_pip_download,
    sdist_of,
)
from tests.support.registry import Registry, registry
from writerpool.config.paths import Paths

pytestmark = [pytest.mark.podman, pytest.mark.image]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Registry, Path, Path]]:
    """(loopback index serving evil's sdist, the package directory, its marker path)."""
    marker = tmp_path / "MARKER"
    package = make_marker_package(tmp_path / "src", marker)
    routes = index_routes({SDIST: sdist_of(package)})
    with registry(tmp_path / "registry", routes, tls=False) as index:
        yield index, package, marker


def _files(index: Registry, package: Path) -> dict[str, str]:
    return {
        "no-binary": f"--no-binary :all:\n{EVIL}=={EVIL_VERSION}\n",
        "file-url": f"{EVIL} @ {package.as_uri()}\n",
        "archive-url": f"{EVIL} @ {index.loopback}/files/{SDIST}\n",
    }


REFUSED_LINE = {
    "no-binary": "line 1 `--no-binary :all:`: an option line (--no-binary)",
    "file-url": "line 1 `evil @ file://",
    "archive-url": "line 1 `evil @ http://127.0.0.1:",
}


@pytest.mark.parametrize("case", ["no-binary", "file-url", "archive-url"])
def test_a_file_that_would_build_a_package_is_refused_before_pip_runs(
    tmp_path: Path, image_pin: Path, served: tuple[Registry, Path, Path],
    monkeypatch: pytest.MonkeyPatch, case: str,
) -> None:  # fmt: skip
    index, package, marker = served
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(_files(index, package)[case])
    index_url = f"{index.loopback}/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", index_url)  # where pip would find the sdist

    code, report = wp("image", "derive", "trap", "--requirements", str(requirements))
    assert not marker.exists(), "the package's setup.py ran on the host"
    assert code == 2 and codes(report) == ["image_requirement_refused"], report
    message = report["findings"][0]["message"]
    assert REFUSED_LINE[case] in message and "before pip ran" in message, message
    assert index.requests == [], "pip never started, so it asked nothing"
    paths = Paths.from_env()
    assert not (paths.state_dir / "images.json").exists(), "nothing recorded"
    assert not (paths.image_cache_dir / "derive-trap").exists()

    # The control: the unguarded derive's pip call builds this package from this file.
    env = {**os.environ, "PIP_INDEX_URL": index_url}
    plain_pip_download(tmp_path / "plain", "--requirement", str(requirements), env=env)
    assert marker.read_text() == "setup.py ran", "the trap is live: plain pip built it"
