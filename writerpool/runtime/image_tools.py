"""writerpool's own code that the writer image carries: the clonetool package (run by
the throwaway containers that read, review or reset a clone) and the acceptance
harness. They are copied in at build from the installed package, so a container on any
host runs the code of the image it was given and nothing of the controller is mounted;
their bytes are part of the image's inputs digest, so a change to them rebuilds it.

The harness package travels as one zip archive (`python3 harness.pyz` runs it, with the
archive alone on its import path): the image carries it, and the isolation control runs
the same bytes uncontained on a host. The archive is made the same, byte for byte, from
the same sources (fixed times and modes), so its digest names the harness.

The sources are read as files (not imported): no host module imports writerpool/payload/.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
CLONETOOL_SOURCE = PACKAGE_DIR / "payload" / "clonetool"
HARNESS_SOURCE = PACKAGE_DIR / "payload" / "harness"
HARNESS_NAME = "harness.pyz"
# The archive's entry point: the package's report, with the archive as its import path.
_ARCHIVE_MAIN = b"import sys\n\nfrom harness.report import main\n\nsys.exit(main())\n"

IN_IMAGE = "/usr/local/lib/writerpool"
# On PYTHONPATH of a throwaway container: `python3 -m clonetool COMMAND`.
CLONETOOL_PARENT = f"{IN_IMAGE}/python"
HARNESS = f"{IN_IMAGE}/{HARNESS_NAME}"
# The build context's name in images/Containerfile (`COPY --from=tools …`).
CONTEXT = "tools"


def harness_archive() -> bytes:
    """The harness package as a zip archive Python runs: its modules (one directory, no
    recursion) under `harness/`, and an entry point; the same bytes for the same sources."""
    modules = sorted(p for p in HARNESS_SOURCE.glob("*.py") if p.is_file())
    members = [("__main__.py", _ARCHIVE_MAIN), *((f"harness/{p.name}", p.read_bytes())
                                                  for p in modules)]  # fmt: skip
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return out.getvalue()


def tool_files() -> list[tuple[str, bytes]]:
    """Each file the image carries: its name in the build context, and its bytes.
    Bounded by clonetool's modules (one directory, no recursion) and the harness."""
    modules = sorted(p for p in CLONETOOL_SOURCE.glob("*.py") if p.is_file())
    return [*((f"clonetool/{p.name}", p.read_bytes()) for p in modules),
            (HARNESS_NAME, harness_archive())]  # fmt: skip


def tools_digest() -> str:
    """The names and bytes of every carried file, in one digest."""
    digest = hashlib.sha256()
    for name, data in tool_files():
        digest.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest()


def stage_tools(directory: Path) -> Path:
    """Write the carried files into `directory` (emptied first): the build context."""
    shutil.rmtree(directory, ignore_errors=True)
    (directory / "clonetool").mkdir(parents=True)
    # COPY keeps the modes: readable by a writer's uid, writable by nobody there.
    for folder in (directory, directory / "clonetool"):
        folder.chmod(0o755)
    for name, data in tool_files():
        (directory / name).write_bytes(data)
        (directory / name).chmod(0o644)
    return directory
