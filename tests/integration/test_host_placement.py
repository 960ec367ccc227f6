"""`mode set … --hosts`: writers placed across hosts by the documented rule, the host
recorded in each writer's state and shown by `writer list`; a name that is no host is
refused, and writers that would land on a host over SSH are refused before any change."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_collect_helpers import (
    ready_writer,
    state_of,
    unique_alias,
    write_workspaces,
)
from tests.integration.writers_support import codes, wp
from tests.support.repos import make_repo

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]
SOCKET = "/run/user/1010/podman/podman.sock"


def _planned(report: dict[str, Any]) -> dict[str, str]:
    return {f["target"].rsplit("-", 1)[1]: f["data"]["host"] for f in report["findings"]
            if f["code"] == "writer_planned"}  # fmt: skip


def test_writers_are_placed_round_robin_and_remote_ones_are_refused_before_any_change(
    tmp_path: Path, image_pin: Path
) -> None:
    alias = unique_alias("place")
    paths = write_workspaces({alias: make_repo(tmp_path / "checkout", commits=2, files=2)})
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    with config.open("a") as out:  # a host table: mode set never connects to it
        out.write(f'\n[hosts.th]\nurl = "ssh://wp@th.test:22{SOCKET}"\n'
                  f'identity = "{tmp_path}/id"\nknown_hosts = "{tmp_path}/known"\n')  # fmt: skip
    ready_writer(alias)
    assert state_of(f"{alias}-w1").host == "local"
    _, listed = wp("writer", "list")
    [row] = [w for w in listed["data"]["writers"] if w["workspace"] == alias]
    assert row["host"] == "local"
    assert "host local" in next(f["message"] for f in listed["findings"]
                                if f["target"] == f"writer/{alias}/{alias}-w1")  # fmt: skip

    options = ["container", "--profiles", "code", "--network", "none", "--writers", "4"]
    code, plan = wp("mode", "set", alias, *options, "--hosts", "local,th")
    assert code == 0, plan
    assert _planned(plan) == {"w2": "th", "w3": "local", "w4": "th"}
    modes_before = paths.modes_file.read_bytes()
    code, refused = wp("mode", "set", alias, *options, "--hosts", "local,th", "--apply")
    assert code != 0 and "writer_host_unsupported" in codes(refused), refused
    assert paths.modes_file.read_bytes() == modes_before
    assert not paths.writer_dir(f"{alias}-w2").exists()

    code, unknown = wp("mode", "set", alias, *options, "--hosts", "local,nowhere")
    assert code == 2 and unknown["findings"][0]["code"] == "host_unknown"
    assert "th.test" not in str(refused) and "wp@" not in str(refused)
