"""writerpool's own code that the writer image carries: the clonetool package (run by
the throwaway containers that read, review or reset a clone) and the acceptance
harness. They are copied in at build from the installed package, so a container on any
host runs the code of the image it was given and nothing of the controller is mounted;
their bytes are part of the image's inputs digest, so a change to them rebuilds it.

The sources are read as files (not imported): runtime/ does not import pool/.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
CLONETOOL_SOURCE = PACKAGE_DIR / "payload" / "clonetool"
HARNESS_SOURCE = PACKAGE_DIR / "pool" / "harness.py"

IN_IMAGE = "/usr/local/lib/writerpool"
# On PYTHONPATH of a throwaway container: `python3 -m clonetool COMMAND`.
CLONETOOL_PARENT = f"{IN_IMAGE}/python"
HARNESS = f"{IN_IMAGE}/harness.py"
# The build context's name in images/Containerfile (`COPY --from=tools …`).
CONTEXT = "tools"


def tool_files() -> list[tuple[str, Path]]:
    """Each file the image carries: its name in the build context, and its source.
    Bounded by clonetool's modules (one directory, no recursion) and the harness."""
    modules = sorted(p for p in CLONETOOL_SOURCE.glob("*.py") if p.is_file())
    return [*((f"clonetool/{p.name}", p) for p in modules), ("harness.py", HARNESS_SOURCE)]


def tools_digest() -> str:
    """The names and bytes of every carried file, in one digest."""
    digest = hashlib.sha256()
    for name, source in tool_files():
        digest.update(f"{name}\0{hashlib.sha256(source.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def stage_tools(directory: Path) -> Path:
    """Copy the carried files into `directory` (emptied first): the build context."""
    shutil.rmtree(directory, ignore_errors=True)
    (directory / "clonetool").mkdir(parents=True)
    # COPY keeps the modes: readable by a writer's uid, writable by nobody there.
    for folder in (directory, directory / "clonetool"):
        folder.chmod(0o755)
    for name, source in tool_files():
        shutil.copyfile(source, directory / name)
        (directory / name).chmod(0o644)
    return directory
