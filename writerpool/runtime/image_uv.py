"""uv in the writer image: one pinned wheel per machine, fetched by the host's pip with its
hash required, its `uv` binary copied in by the offline build (uv is not in Debian).

The version and the wheel's SHA-256 are inputs of the image: a change to either builds a
new image, and a wheel with any other content is refused before it reaches a build.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import zipfile
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, clean_env, last_line, run

UV_VERSION = "0.13.8"
# machine → (wheel file name, its SHA-256), as the package index serves them.
UV_WHEELS = {
    "x86_64": (
        "uv-0.13.8-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "e18a57b8b352eb7c8feb317b9f6f533c8f0ad9673fd6cf34bbe3cf1a9f6a8984",
    ),
    "aarch64": (
        "uv-0.13.8-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64.whl",
        "0b3e8b1a4f5e405e31e2ff33de8af4744831e9f7338539671efbd8c3c94e791d",
    ),
}
PIP_TIMEOUT = 900.0
# The binary is about 38 MB; a member claiming far more is not read.
MAX_BINARY = 200 * 1024 * 1024
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
# pip reads these from the operator's environment besides its config files.
PIP_ENV = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")


def pip_env() -> dict[str, str]:
    """The host's pip configuration (PIP_*, proxies, CA) and nothing else of the environment."""
    keep = {k: v for k, v in os.environ.items() if k.startswith("PIP_") and k != "PIP_TARGET"}
    keep.update({k: os.environ[k] for k in (*PROXY_VARS, *PIP_ENV) if k in os.environ})
    return clean_env(keep)


def uv_wheel(machine: str | None = None) -> tuple[str, str]:
    """The pinned wheel (file name, SHA-256) for this machine."""
    found = UV_WHEELS.get(machine or platform.machine())
    if found is None:
        raise WriterpoolError(
            "image_build_failed", f"no pinned uv wheel for the machine {platform.machine()}"
        )
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(folder: Path, name: str, sha: str) -> None:
    # The wheel is not tied to a Python; its Requires-Python is checked against 3.13.
    requirements = folder / "uv-requirements.txt"
    requirements.write_text(f"uv=={UV_VERSION} --hash=sha256:{sha}\n")
    platform_tag = name.rsplit("-", maxsplit=1)[-1].removesuffix(".whl").split(".")[0]
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
            "--no-input", "--no-deps", "--only-binary=:all:", "--platform", platform_tag,
            "--python-version", "3.13", "--require-hashes", "--requirement", str(requirements),
            "--dest", str(folder)]  # fmt: skip
    try:
        done = run(argv, env=pip_env(), timeout=PIP_TIMEOUT, check=False)
    except CommandFailed as exc:
        raise WriterpoolError("image_build_failed", "pip download of uv timed out") from exc
    if done.returncode != 0:
        last = last_line(done.stderr)[:300]
        raise WriterpoolError("image_build_failed", f"pip download of uv failed: {last}")


def fetch_uv(cache: Path) -> Path:
    """A build context holding the pinned `uv` binary; the wheel is kept in cache."""
    name, sha = uv_wheel()
    folder = cache / f"uv-{UV_VERSION}"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / name
    if not (wheel.is_file() and _sha256(wheel) == sha):
        _download(folder, name, sha)
        if not wheel.is_file() or _sha256(wheel) != sha:
            raise WriterpoolError("image_build_failed", "the uv wheel does not match its pin")
    context = folder / "context"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir()
    member = f"uv-{UV_VERSION}.data/scripts/uv"
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo(member)
        if info.file_size > MAX_BINARY:
            raise WriterpoolError("image_build_failed", "the uv wheel's binary is too large")
        with zf.open(info) as src, (context / "uv").open("wb") as dst:
            shutil.copyfileobj(src, dst)
    (context / "uv").chmod(0o755)
    return context
