"""A writer's host in its state: recorded when provisioned, the local host for states
written before writers had one."""

from __future__ import annotations

import json
from pathlib import Path

from writerpool.config.paths import Paths
from writerpool.pool.writer.container import writer_of
from writerpool.runtime.local import LocalPodman
from writerpool.state.writer import BaseRecord, WriterState, load_state, save_state


def _state(host: str | None) -> WriterState:
    fields = {
        "name": "demo-w1", "alias": "demo", "settings_digest": "sha256:" + "0" * 64,
        "image": "default", "network": "none", "cache": "none", "lifecycle": "keep",
        "tags": "none", "profiles": ["default"],
        "base": BaseRecord(name="main", ref="refs/heads/main", commit="a" * 40, branch="main"),
    }  # fmt: skip
    return WriterState.model_validate({**fields, **({} if host is None else {"host": host})})


def test_a_state_without_a_host_is_the_local_hosts(tmp_path: Path) -> None:
    paths = Paths.from_env()
    wdir = paths.writer_dir("demo-w1")
    wdir.mkdir(parents=True)
    save_state(wdir, _state(None))
    data = json.loads((wdir / "state.json").read_text())
    del data["host"]  # as written before writers had a host
    (wdir / "state.json").write_text(json.dumps(data))
    state = load_state(wdir)
    assert state is not None and state.host == "local"
    writer = writer_of(paths, state)
    assert (writer.host, writer.record.path) == ("local", wdir)
    # The local host keeps the writer's storage in its record (the layout on disk).
    assert LocalPodman().storage_path(writer, "clone") == wdir / "clone"


def test_the_recorded_host_names_the_writers_host(tmp_path: Path) -> None:
    paths = Paths.from_env()
    wdir = paths.writer_dir("demo-w1")
    wdir.mkdir(parents=True)
    save_state(wdir, _state("build-2"))
    state = load_state(wdir)
    assert state is not None and writer_of(paths, state).host == "build-2"
