"""writerpool's code reaches containers one way: inside the writer image. No container
spec in the package mounts a file of the installed package (clonetool, the harness)."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from writerpool.runtime import image_tools

PACKAGE = image_tools.PACKAGE_DIR
# Names that stand for a file of the installed package.
PACKAGE_NAMES = {"__file__", "harness_path", "CLONETOOL_SOURCE", "HARNESS_SOURCE", "PACKAGE_DIR",
                 "TOOL", "harness"}  # fmt: skip


def _mount_sources(tree: ast.AST) -> list[ast.expr]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Mount", "VolumeMount"):
            found += [k.value for k in node.keywords if k.arg == "source"]
            found += node.args[:1]
    return found


def _names(expr: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(expr) if isinstance(n, ast.Attribute)
    }


def test_no_container_spec_mounts_a_file_of_the_package() -> None:
    offending = []
    sources = 0
    for module in sorted(PACKAGE.rglob("*.py")):  # bounded by the package's modules
        for expr in _mount_sources(ast.parse(module.read_text(), str(module))):
            sources += 1
            if _names(expr) & PACKAGE_NAMES:
                offending.append(f"{module.relative_to(PACKAGE)}:{expr.lineno}")
    assert sources > 5, "the scan found no mounts: it no longer sees the specs"
    assert offending == []


def test_the_image_carries_every_clonetool_module_and_the_harness() -> None:
    names = [name for name, _ in image_tools.tool_files()]
    modules = sorted(p.name for p in image_tools.CLONETOOL_SOURCE.glob("*.py"))
    assert names == [*(f"clonetool/{m}" for m in modules), "harness.pyz"]
    assert "clonetool/__main__.py" in names
    containerfile = (PACKAGE.parent / "images" / "Containerfile").read_text()
    copy = f"--from={image_tools.CONTEXT} clonetool {image_tools.CLONETOOL_PARENT}/clonetool"
    assert copy in containerfile
    assert f"harness.pyz {image_tools.HARNESS}" in containerfile


def test_the_harness_archive_is_the_same_for_the_same_sources_and_runs(tmp_path: Path) -> None:
    archive = image_tools.harness_archive()
    assert archive == image_tools.harness_archive()
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        names = opened.namelist()
    modules = sorted(p.name for p in image_tools.HARNESS_SOURCE.glob("*.py"))
    assert names == ["__main__.py", *(f"harness/{m}" for m in modules)]
    program = tmp_path / image_tools.HARNESS_NAME
    program.write_bytes(archive)
    # Run as the image runs it, from a directory whose `harness` would shadow it if the
    # working directory were on the import path.
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "report.py").write_text("raise SystemExit(7)\n")
    done = subprocess.run([sys.executable, str(program)], cwd=tmp_path, capture_output=True,
                          timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schemaVersion"] == 1 and "host_canary" in report["checks"]
