"""`writer status` in the session guard's words, on a host kept in memory
(tests/support/memhost.py), where no clone can be looked into: a writer held by a
command or kept warm, one whose clone could not be inspected, one whose control or
acceptance is no longer current or whose image its host lacks, one on a host that is not
configured, and a name that is no writer. Each row says why and what to run next; no
row names a path. (What a clone holds, and the commands it leads to, is read in real
writers: tests/integration/test_operator_view.py.)"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.memhost import MemoryHost
from tests.support.memwriters import IMAGE, memory_pool
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.status.writers import writer_statuses
from writerpool.pool.writer.lease import Lease
from writerpool.state.writer import load_state, save_state


def _rows(paths: Paths, host: MemoryHost, name: str | None = None) -> dict[str, dict[str, Any]]:
    report = writer_statuses(paths, host, load_config(paths), "writer status", name)
    text = report.render_text()
    assert str(paths.state_dir) not in text and str(Path.home()) not in text, text
    return {row["name"]: row for row in report.data["writers"]}


def test_held_and_warm_writers_say_who_holds_them_and_need_no_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, host = memory_pool(tmp_path, writers=3)
    monkeypatch.setattr(sys, "argv", ["writerpool", "writer", "collect", "demo-w1", "--apply"])
    busy, warm = Lease(paths.writer_dir("demo-w1")), Lease(paths.writer_dir("demo-w2"))
    busy.acquire(wait=0)
    warm.acquire(wait=0)
    warm.mark_warm()
    try:
        rows = _rows(paths, host)
    finally:
        busy.release()
        warm.release()
    w1, w2, w3 = rows["demo-w1"], rows["demo-w2"], rows["demo-w3"]
    assert (w1["state"], w1["leasable"], w1["next"]) == ("writer_busy", False, None), w1
    assert w1["heldBy"]["pid"] == os.getpid()
    assert "writerpool writer collect demo-w1 --apply" in w1["heldBy"]["command"]
    assert (w2["state"], w2["next"]) == ("writer_warm", None), w2
    assert w2["heldBy"]["warm"] is True
    # A status looks into a free writer's clone, which no container shows in memory:
    # the row says it could not, and what to run.
    assert (w3["state"], w3["leasable"]) == ("writer_inspect_failed", False), w3
    assert w3["atBaselineUnknown"] == "the clone could not be inspected (writer_inspect_failed)"
    assert w3["next"].startswith("writerpool writer reset demo-w3 --discard (shows what it")
    assert host.ran  # it was tried, in a container
    assert _rows(paths, host)["demo-w1"]["state"] != "writer_busy"  # freed


def test_a_writer_not_ready_says_why_and_which_command_makes_it_ready(tmp_path: Path) -> None:
    # No baseline yet: the status judges readiness alone (an inspection would fail here).
    paths, host = memory_pool(tmp_path, writers=2, baseline=False)
    record = paths.control_file.read_bytes()
    paths.control_file.unlink()
    rows = _rows(paths, host)
    assert {n: (r["state"], r["leasable"]) for n, r in rows.items()} == {
        "demo-w1": ("isolation_control_required", False),
        "demo-w2": ("isolation_control_required", False),
    }
    assert rows["demo-w1"]["next"] == "writerpool control --apply"
    assert rows["demo-w1"]["why"] == "no passing isolation control"
    # The control back; w2 accepted under a spec other than the one its host gives now.
    paths.control_file.write_bytes(record)
    state = load_state(paths.writer_dir("demo-w2"))
    assert state is not None
    save_state(paths.writer_dir("demo-w2"), state.model_copy(update={"fingerprint": "sha256:0"}))
    rows = _rows(paths, host)
    assert rows["demo-w2"]["state"] == "writer_acceptance_stale", rows["demo-w2"]
    assert rows["demo-w2"]["next"].startswith("writerpool mode set demo ")
    assert rows["demo-w2"]["next"].endswith("--apply (re-runs acceptance)")
    assert rows["demo-w1"]["state"] != "writer_acceptance_stale"
    # On a host without the writers' image, each is not ready by that host's code.
    assert {r["state"] for r in _rows(paths, MemoryHost("local")).values()} == {"image_unavailable"}
    assert IMAGE not in _rows(paths, MemoryHost("local"))["demo-w1"]["why"]


def test_a_writer_on_a_host_not_configured_and_an_unknown_name_are_said_so(
    tmp_path: Path,
) -> None:
    paths, host = memory_pool(tmp_path, writers=2, baseline=False)
    state = load_state(paths.writer_dir("demo-w2"))
    assert state is not None
    save_state(paths.writer_dir("demo-w2"), state.model_copy(update={"host": "gone"}))
    row = _rows(paths, host)["demo-w2"]
    assert (row["state"], row["host"]) == ("host_unknown", "gone"), row
    assert row["why"] == "its host cannot be reached (host_unknown)", row
    assert row["atBaselineUnknown"] == "the clone was not inspected: host gone is not reachable"
    with pytest.raises(WriterpoolError) as unknown:
        _rows(paths, host, "demo-w9")
    assert unknown.value.code == "writer_unknown"
    assert "demo-w1" in unknown.value.message and "demo-w2" in unknown.value.message
