"""The wheels of a derived image: fetched by the host's pip, which may start no program.

pip builds a package that is not a wheel (a source distribution, a directory, a URL) by
starting its build backend in a new process, and nothing in a requirements file or pip's
options stops that for every case: a direct reference ignores `--only-binary`, and a
wheel from an index may itself depend on `name @ URL`. So pip runs here under a Python
audit hook, installed before pip is imported, that refuses every process start: no
package code can run on the host whatever the index serves. The requirements pip reads
are the validated, re-rendered lines (`runtime/requirements.py`), never the operator's
file, and pip's environment keeps only the settings that say where to fetch from.

What pip left is then checked (regular `*.whl` files with valid names only) and hashed:
the manifest of (SHA-256, file) lines is what the image installs, and its own SHA-256
names the build step, so no cached layer of other wheels can stand in for it.
"""

from __future__ import annotations

import hashlib
import re
import stat
import sys
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from pydantic import BaseModel, ConfigDict, Field

from writerpool.errors import WriterpoolError
from writerpool.report import sanitize
from writerpool.runtime.image_build import Progress, ToolFailed, run_tool
from writerpool.runtime.image_uv import pip_env
from writerpool.runtime.requirements import Requirements

PIP_TIMEOUT = 1800.0
MANIFEST = "SHA256SUMS"
# Under the work directory: the build context, and the wheels folder in it.
CONTEXT = "context"
WHEELS = "wheels"
# pip settings (PIP_<NAME>) that say where and how to fetch. The others stay behind:
# PIP_REQUIREMENT, PIP_CONSTRAINT, PIP_EDITABLE, PIP_NO_BINARY and the like would add
# to, or change, what is fetched.
PIP_FETCH_SETTINGS = frozenset({
    "INDEX_URL", "EXTRA_INDEX_URL", "NO_INDEX", "FIND_LINKS", "TRUSTED_HOST", "CERT",
    "CLIENT_CERT", "PROXY", "TIMEOUT", "DEFAULT_TIMEOUT", "RETRIES", "CACHE_DIR",
    "NO_CACHE_DIR", "CONFIG_FILE", "KEYRING_PROVIDER", "USE_FEATURE", "NO_COLOR",
})  # fmt: skip
# The exit status of pip once the guard refused a process start.
GUARD_EXIT = 86
# Run as `python -P -c PIP_GUARD download …`: the hook cannot be removed once added.
# pip's user agent asks `lsb_release -a`, `uname -rs` and `rustc --version` and does
# without their answers: refused too, but quietly. Any other refusal that ends pip with
# an error ends it with GUARD_EXIT instead.
PIP_GUARD = """\
import os, runpy, sys
STARTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
          "os.fork", "os.forkpty"}
PROBES = {("lsb_release", "-a"), ("uname", "-rs"), ("rustc", "--version")}
refused = []
def guard(event, args):
    if event not in STARTS:
        return
    argv = args[1] if event == "subprocess.Popen" else ()
    if (tuple(argv) if isinstance(argv, (list, tuple)) else (argv,)) not in PROBES:
        refused.append(event)
        os.write(2, b"writerpool: pip was about to start a program (a build); refused\\n")
    raise PermissionError("writerpool: pip may start no program while it fetches wheels")
sys.addaudithook(guard)
try:
    runpy.run_module("pip", run_name="__main__", alter_sys=True)
except SystemExit as end:
    if end.code not in (None, 0) and refused:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT)
    raise
""".replace("EXIT", str(GUARD_EXIT))

_LAST_PART = re.compile(r"(?<!\S)(?:file://)?/(?:[^\s/]+/)*([^\s/]+)")
# A wheel's file name as it may appear in the manifest and in the build step's shell.
_WHEEL_FILE = re.compile(r"^[A-Za-z0-9_.+!-]{1,200}\.whl$")


class Wheel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(pattern=_WHEEL_FILE.pattern)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Wheelhouse(BaseModel):
    """The wheels pip fetched, sorted by file name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wheels: tuple[Wheel, ...] = Field(min_length=1)

    def manifest(self) -> str:
        """`sha256sum --check` input: exactly these files with exactly these contents."""
        return "".join(f"{w.sha256}  {w.file}\n" for w in self.wheels)

    def digest(self) -> str:
        return hashlib.sha256(self.manifest().encode()).hexdigest()


def fetch_env() -> dict[str, str]:
    """pip's environment: the host's fetch settings (index, CA, proxy), nothing more."""
    return {k: v for k, v in pip_env().items() if _fetch_setting(k)}


def _fetch_setting(key: str) -> bool:
    return not key.startswith("PIP_") or key.removeprefix("PIP_") in PIP_FETCH_SETTINGS


def pip_argv(target_args: list[str], requirements: Path, dest: Path) -> list[str]:
    # -P: the working directory is not put on sys.path (no `pip` module planted there).
    return [sys.executable, "-P", "-c", PIP_GUARD, "download", "--disable-pip-version-check",
            "--no-input", "--dest", str(dest), *target_args, "--only-binary=:all:",
            "--requirement", str(requirements)]  # fmt: skip


def _collecting(out: bytes) -> str:
    """pip's last `Collecting …`/`Processing …` line: what it was about to build (a path
    shortened to its last part, which names the package)."""
    lines = [ln.strip() for ln in out.decode(errors="replace").splitlines()]
    found = [ln for ln in lines if ln.startswith(("Collecting ", "Processing "))]
    return _LAST_PART.sub(r"\1", found[-1])[:200] if found else "(pip named nothing)"


def download_wheels(requirements: Requirements, target_args: list[str], work: Path,
                    progress: Progress) -> Wheelhouse:  # fmt: skip
    """pip download into work/context/wheels (work: private and empty); hash what it left."""
    given, dest = work / "requirements.txt", work / CONTEXT / WHEELS
    given.write_text(requirements.render())
    dest.mkdir(mode=0o700, parents=True)
    try:
        run_tool(pip_argv(target_args, given, dest), env=fetch_env(), timeout=PIP_TIMEOUT,
                 progress=progress, what="pip download", cwd=work)  # fmt: skip
    except ToolFailed as exc:
        if exc.returncode != GUARD_EXIT:
            raise
        raise WriterpoolError(
            "image_derive_build_refused",
            sanitize(
                "pip was about to build a package that is not a wheel (a source "
                "distribution, a directory or a URL, perhaps a dependency of a wheel) and "
                f"was stopped before the build started; pip's last step: {_collecting(exc.out)}"
            ),
        ) from exc
    return hash_wheelhouse(dest)


def hash_wheelhouse(folder: Path) -> Wheelhouse:
    """Every entry must be a regular wheel file with a valid name; each is hashed."""
    wheels: list[Wheel] = []
    for entry in sorted(folder.iterdir()):
        mode = entry.lstat().st_mode
        if not stat.S_ISREG(mode) or not _WHEEL_FILE.fullmatch(entry.name):
            raise WriterpoolError(
                "image_derive_failed",
                sanitize(f"pip left {entry.name[:80]!r}, which is not a wheel file; nothing built"),
            )
        try:
            parse_wheel_filename(entry.name)
        except InvalidWheelFilename as exc:
            raise WriterpoolError(
                "image_derive_failed", f"pip left a wheel with an invalid name: {entry.name}"
            ) from exc
        digest = hashlib.sha256()
        with entry.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        wheels.append(Wheel(file=entry.name, sha256=digest.hexdigest()))
    if not wheels:
        raise WriterpoolError("image_derive_failed", "pip downloaded no wheel")
    return Wheelhouse(wheels=tuple(wheels))
