"""A tiny pure-Python wheel made in the test (no registry, no build backend), and a small
project whose unittest suite needs it."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from tests.support.repos import run_git

WHEEL_NAME = "tinycalc"
WHEEL_VERSION = "0.1"
WHEEL_FILE = f"{WHEEL_NAME}-{WHEEL_VERSION}-py3-none-any.whl"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def make_wheel(
    folder: Path, version: str = WHEEL_VERSION, note: str = "", requires: tuple[str, ...] = ()
) -> Path:
    """folder/tinycalc-VERSION-py3-none-any.whl: a module with add(), its version and a
    note (other bytes under the same file name), depending on `requires`."""
    info = f"{WHEEL_NAME}-{version}.dist-info"
    depends = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{WHEEL_NAME}/__init__.py": (
            f'VERSION = "{version}"\nNOTE = "{note}"\n\n\n'
            "def add(a: int, b: int) -> int:\n    return a + b\n"
        ).encode(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {WHEEL_NAME}\nVersion: {version}\n{depends}"
        ).encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: writerpool-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{WHEEL_NAME}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def requirements_for(path: Path, version: str = WHEEL_VERSION) -> Path:
    """A requirements file that pins the tiny wheel (where pip finds it is pip's setting,
    as `find_links_env` gives it: a requirements file may not say)."""
    path.write_text(f"{WHEEL_NAME}=={version}\n")
    return path


def find_links_env(wheel_dir: Path) -> dict[str, str]:
    """An operator's pip settings that keep pip off every index and on wheel_dir."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheel_dir)}


# A project whose suite imports the wheel's module: it passes only where tinycalc is
# installed. `python3 -m unittest` finds tests/test_*.py.
PROJECT_FILES = {
    "calc.py": "import tinycalc\n\n\ndef total(values):\n"
    "    out = 0\n    for v in values:\n        out = tinycalc.add(out, v)\n    return out\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": "import unittest\n\nimport calc\n\n\n"
    "class TotalTest(unittest.TestCase):\n"
    "    def test_total(self):\n        self.assertEqual(calc.total([1, 2, 3]), 6)\n\n"
    "    def test_empty(self):\n        self.assertEqual(calc.total([]), 0)\n",
}


def make_project(path: Path, wheel_dir: Path | None = None) -> Path:
    """A git checkout on main holding the project (and, given wheel_dir, the wheel in dist/)."""
    for name, text in PROJECT_FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    if wheel_dir is not None:
        (path / "dist").mkdir()
        (path / "dist" / WHEEL_FILE).write_bytes((wheel_dir / WHEEL_FILE).read_bytes())
    run_git(path, "init", "-q", "--initial-branch=main")
    run_git(path, "add", ".")
    run_git(path, "commit", "-q", "-m", "calc and its tests")
    return path
