"""`writerpool writer verify NAME` on a real accepted writer: state, clone and readiness,
the blocking doctor checks of its own workspace, and a bounded MCP handshake through
`writerpool serve` with the current configuration. It starts no session."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.writers_support import (
    codes,
    make_checkout,
    wp,
    write_workspaces,
    writer_containers,
)

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

ALIAS = "regverify"
WRITER = f"{ALIAS}-w1"


def audit_actions() -> list[str]:
    log = Path(os.environ["XDG_STATE_HOME"]) / "writerpool" / "audit.log"
    if not log.exists():
        return []
    return [json.loads(line)["action"] for line in log.read_text().splitlines()]


@pytest.fixture
def accepted(tmp_path: Path, image_pin: Path) -> Path:
    checkout = make_checkout(tmp_path / "checkout", commits=2)
    # A second workspace whose checkout is missing: its doctor failure is not this writer's.
    write_workspaces({ALIAS: checkout, "regbroken": tmp_path / "missing"})
    wp("control", "--apply", check=True)
    wp("mode", "set", ALIAS, "container", "--profiles", "code", "--apply", check=True)
    return checkout


def test_verify_runs_scoped_doctor_and_a_handshake_without_a_session(accepted: Path) -> None:
    before = audit_actions()
    code, report = wp("writer", "verify", WRITER)
    assert code == 0, report
    assert codes(report) == ["writer_verified", "mcp_verified"], report
    handshake = report["findings"][1]
    assert handshake["target"] == f"writer/{ALIAS}/{WRITER}"
    assert len(handshake["data"]["tools"]) == 8
    # The handshake's only tool call; no session was started, so no provider was reached.
    assert audit_actions()[len(before) :] == ["pi_capabilities_get", "writer verify"]
    assert writer_containers(WRITER) == []


def test_verify_reports_a_blocking_doctor_failure_of_its_workspace(accepted: Path) -> None:
    (accepted / ".git").rename(accepted / "git-moved-away")
    code, report = wp("writer", "verify", WRITER)
    assert code == 1, report
    failed = [f for f in report["findings"] if f["code"] == "doctor_failed"]
    assert [f["data"]["check"] for f in failed] == ["workspace_checkout"], report
    assert "mcp_verified" in codes(report)
