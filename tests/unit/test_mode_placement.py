"""`mode set … --hosts` on a host kept in memory (tests/support/memhost.py): writers are
placed round robin by the documented rule, a network a writer on another host cannot have
is refused before anything is stored, and a name that is no host is refused. Placement is
the pool's own logic: no container runs for it, and the other host is never connected
(its address is a `.test` name nothing answers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.writers_support import write_workspaces
from tests.support.memhost import MemoryHost
from tests.support.repos import make_repo
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import UsageError
from writerpool.pool.modes.change import set_mode
from writerpool.pool.modes.request import ModeRequest
from writerpool.report import Report

ALIAS = "place"
SOCKET = "/run/user/1010/podman/podman.sock"


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    write_workspaces({ALIAS: make_repo(tmp_path / "checkout", commits=2, files=2)})
    config = Path(os.environ["WRITERPOOL_CONFIG"])
    with config.open("a") as out:  # a host table: mode set never connects to it
        out.write(f'\n[hosts.th]\nurl = "ssh://wp@th.test:22{SOCKET}"\n'
                  f'identity = "{tmp_path}/id"\nknown_hosts = "{tmp_path}/known"\n')  # fmt: skip
    return Paths.from_env()


def _set(paths: Paths, network: str, writers: int, hosts: str, apply: bool = False) -> Report:
    request = ModeRequest(
        alias=ALIAS, mode="container", profiles=("code",), network=network, writers=writers,
        hosts=tuple(hosts.split(",")), apply=apply, container_options_given=True,
    )  # fmt: skip
    local = MemoryHost("local", remote_rules=False)  # this machine: every network kind
    return set_mode(paths, local, load_config(paths), request)


def _planned(report: Report) -> dict[str, Any]:
    return {f.target.rsplit("-", 1)[1]: f.data["host"] for f in report.findings
            if f.code == "writer_planned"}  # fmt: skip


def test_writers_are_placed_round_robin_and_open_networks_are_refused_on_other_hosts(
    paths: Paths,
) -> None:
    plan = _set(paths, "none", 4, "local,th")
    assert not plan.has_error(), plan.render_text()
    assert _planned(plan) == {"w1": "local", "w2": "th", "w3": "local", "w4": "th"}
    assert not paths.modes_file.exists()  # a plan stores nothing

    # An open network would need the provider's key on th: refused before any change.
    refused = _set(paths, "slirp4netns", 2, "local,th", apply=True)
    assert "writer_host_unsupported" in refused.codes() and refused.has_error()
    assert not paths.modes_file.exists()
    assert not paths.writer_dir(f"{ALIAS}-w1").exists()
    assert not paths.writer_dir(f"{ALIAS}-w2").exists()
    # Only local: the same network is placed there.
    assert _planned(_set(paths, "slirp4netns", 2, "local")) == {"w1": "local", "w2": "local"}

    with pytest.raises(UsageError) as unknown:
        _set(paths, "none", 4, "local,nowhere")
    assert unknown.value.code == "host_unknown"
    text = refused.render_text() + unknown.value.message
    assert "th.test" not in text and "wp@" not in text
