"""A gate reuses a recent passing probe of Podman; doctor, a changed key, age or a failed
trial make it probe afresh (runtime/probe_record.py, runtime/host_facts.py).

Podman is a script here that logs every call and answers with recorded outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from writerpool.runtime import probe_record
from writerpool.runtime.host_facts import gather_host_facts

DATA = Path(__file__).parent / "data"
IMAGE = "f" * 64


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A podman that logs its first two arguments; `run` fails when tmp_path/broken exists."""
    log = tmp_path / "calls"
    fake = tmp_path / "podman"
    fake.write_text(f"""#!/bin/sh
echo "$1 $2" >> {log}
case "$1" in
version) cat {DATA / "podman-version-4.3.1.json"} ;;
info) cat {DATA / "podman-info-runc-hybrid.json"} ;;
run) test ! -e {tmp_path / "broken"} ;;
esac
""")
    fake.chmod(0o755)
    monkeypatch.setenv("WRITERPOOL_PODMAN", str(fake))
    # The API socket is looked at each time, probe or not; not what these tests are about.
    monkeypatch.setattr("writerpool.runtime.host_facts.probe_api", lambda podman: None)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    return log


def commands(log: Path) -> list[str]:
    found = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [line.split()[0] for line in found]


def gate() -> list[str]:
    facts = gather_host_facts([IMAGE], IMAGE, reuse=True)
    assert facts.podman_info is not None and facts.podman_version is not None
    return [] if facts.runtime_trial is None else [str(facts.runtime_trial.ok)]


TRIAL = os.getuid() != 0  # root runs no trial container (gather_host_facts)


def test_a_gate_after_a_passing_probe_asks_podman_only_what_changes(calls: Path) -> None:
    assert gate() == (["True"] if TRIAL else [])
    first = commands(calls)
    assert first[:2] == ["version", "info"] and ("run" in first) == TRIAL
    # Within the record's age and key: images and the API are looked at, nothing else.
    assert gate() == (["True"] if TRIAL else [])
    assert "version" not in (again := commands(calls)) and "info" not in again
    assert "run" not in again and "image" in again
    # Doctor never reuses it.
    gather_host_facts([IMAGE], IMAGE)
    assert commands(calls)[:2] == ["version", "info"]


def test_a_changed_key_or_an_old_record_probes_again(
    calls: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gate()
    commands(calls)
    monkeypatch.setenv("CONTAINERS_CONF", str(tmp_path / "other.conf"))
    gate()
    assert commands(calls)[:2] == ["version", "info"]
    record = probe_record.record_path()
    raw = json.loads(record.read_bytes())
    raw["at"] -= probe_record.MAX_AGE + 1
    record.write_text(json.dumps(raw))
    gate()
    assert commands(calls)[:2] == ["version", "info"]
    record.write_text("{not json")
    gate()
    assert commands(calls)[:2] == ["version", "info"]


@pytest.mark.skipif(not TRIAL, reason="root runs no trial container")
def test_a_failed_trial_is_not_recorded_and_is_tried_again(calls: Path, tmp_path: Path) -> None:
    (tmp_path / "broken").touch()
    assert gate() == ["False"]
    assert not probe_record.record_path().exists()
    assert gate() == ["False"]
    assert commands(calls).count("run") >= 2
    (tmp_path / "broken").unlink()
    assert gate() == ["True"]
    assert gate() == ["True"]
    assert commands(calls).count("run") == 1  # the pass is reused


def test_a_record_of_another_image_runs_that_images_trial(calls: Path) -> None:
    gate()
    commands(calls)
    facts = gather_host_facts([IMAGE, "e" * 64], "e" * 64, reuse=True)
    ran = commands(calls)
    assert "version" not in ran and ("run" in ran) == TRIAL
    assert (facts.runtime_trial is not None) == TRIAL
