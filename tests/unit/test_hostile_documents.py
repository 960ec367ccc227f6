"""Hostile configuration, modes and state files end in a finding with a code: never a
traceback, a hang or the machine's memory. Driven through the CLI's top-level handler,
in-process; a hang fails the test at its timeout (pytest-timeout interrupts a blocking
open)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import config_text, make_checkout
from tests.support.cli import run_cli
from writerpool.config.paths import Paths
from writerpool.pool.acceptance.report import parse_harness_report

NESTED = b"a = " + b"[" * 200_000 + b"]" * 200_000 + b"\n"
NESTED_JSON = b"[" * 200_000 + b"]" * 200_000


# A FIFO read by a blocking open would hang: the timeout turns that into a failure.
pytestmark = pytest.mark.timeout(60)


def wp(*args: str) -> tuple[int, dict[str, Any], str]:
    done = run_cli(*args, "--json")
    return done.code, json.loads(done.out), done.err


def codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for f in report["findings"]]


def plant(kind: str, path: Path, valid: bytes) -> None:
    """Put a hostile document of this kind at path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "nested":
        path.write_bytes(NESTED if path.suffix == ".toml" else NESTED_JSON)
    elif kind == "huge":
        path.write_bytes(valid + b"\n" + b" " * (2 * 1024 * 1024))
    elif kind == "directory":
        path.mkdir()
    else:
        raise AssertionError(kind)


KINDS = ["fifo", "dev_zero", "nested", "huge", "directory"]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return make_checkout(tmp_path / "checkout", commits=1)


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_config_file_is_config_invalid(kind: str, checkout: Path) -> None:
    config = Paths.from_env().config_file
    plant(kind, config, config_text({"demo": checkout}).encode())
    for args in (("writer", "list"), ("mode", "set", "demo", "read-only")):
        code, report, _ = wp(*args)
        assert (code, codes(report)) == (1, ["config_invalid"])


def test_a_config_symlink_to_a_regular_file_is_read(checkout: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "writerpool.toml"
    real.parent.mkdir()
    real.write_text(config_text({"demo": checkout}))
    config = Paths.from_env().config_file
    config.parent.mkdir(parents=True)
    config.symlink_to(real)
    code, report, _ = wp("writer", "list")
    assert code == 0, report


@pytest.mark.parametrize("kind", [*KINDS, "symlink"])
def test_a_hostile_modes_file_is_modes_file_invalid(
    kind: str, checkout: Path, tmp_path: Path
) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(config_text({"demo": checkout}))
    valid = b'{"schemaVersion": 1, "workspaces": {}}'
    if kind == "symlink":  # writerpool writes this file itself and never as a link
        (tmp_path / "modes.json").write_bytes(valid)
        paths.modes_file.symlink_to(tmp_path / "modes.json")
    else:
        plant(kind, paths.modes_file, valid)
    code, report, _ = wp("mode", "set", "demo", "read-only")
    assert (code, codes(report)) == (1, ["modes_file_invalid"])


@pytest.mark.parametrize("kind", [*KINDS, "symlink"])
def test_a_hostile_state_file_is_a_finding_on_that_writer(
    kind: str, checkout: Path, tmp_path: Path
) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(config_text({"demo": checkout}))
    state = paths.writer_dir("demo-w1") / "state.json"
    if kind == "symlink":
        (tmp_path / "elsewhere.json").write_text("{}")
        state.parent.mkdir(parents=True)
        state.symlink_to(tmp_path / "elsewhere.json")
    else:
        plant(kind, state, b"{}")
    code, report, _ = wp("writer", "list")
    assert code == 1
    assert codes(report) in (["writer_state_unreadable"], ["writer_state_invalid"])


HarnessCase = Callable[[], bytes]
HARNESS_REPORTS: dict[str, bytes] = {
    "checks_not_objects": b'{"verdict": "pass", "network": "limited", "checks": {"a": 1}}',
    "checks_a_list": b'{"verdict": "pass", "network": "limited", "checks": [1, 2]}',
    "status_unknown": b'{"verdict":"pass","network":"limited","checks":{"a":{"status":"ok"}}}',
    "nested": b'{"verdict": "pass", "checks": ' + NESTED_JSON + b"}",
    "huge": b'{"verdict": "pass", "checks": {}, "x": "' + b"a" * 400_000 + b'"}',
    "not_json": b"\xff\xfe",
}


@pytest.mark.parametrize("name", sorted(HARNESS_REPORTS))
def test_a_malformed_harness_report_is_no_report(name: str) -> None:
    assert parse_harness_report(HARNESS_REPORTS[name]) is None


def test_a_harness_report_accepts_any_check_name() -> None:
    raw = {"schemaVersion": 1, "verdict": "fail", "network": "limited", "future": 1,
           "checks": {"new_probe": {"status": "inconclusive", "detail": "x"},
                      "host_home": {"status": "fail", "detail": ""}}}  # fmt: skip
    report = parse_harness_report(json.dumps(raw).encode())
    assert report is not None
    assert report.with_status("inconclusive") == ["new_probe"]
    assert report.status_of("host_home") == "fail" and report.status_of("absent") is None


@pytest.mark.parametrize("image", ["Zz", "DEFAULT", "A" * 64, " default", "default ", "-x"])
def test_a_bad_image_value_is_a_usage_error(image: str, checkout: Path) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(config_text({"demo": checkout}))
    code, report, _ = wp("mode", "set", "demo", "container", "--profiles", "code", "--image", image)
    assert (code, codes(report)) == (2, ["usage_invalid"])
    assert not paths.modes_file.exists()


def test_an_image_name_nothing_was_derived_under_is_refused(checkout: Path) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True)
    paths.config_file.write_text(config_text({"demo": checkout}))
    code, report, _ = wp("mode", "set", "demo", "container", "--profiles", "code", "--image", "zz")
    assert (code, codes(report)) == (1, ["image_name_unknown"])
    assert not paths.modes_file.exists()
