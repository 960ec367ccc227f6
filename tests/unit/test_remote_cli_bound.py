"""What a host's Podman prints through the podman client (lists, inspections) is held only
up to a bound: a host answering without end is refused before the controller holds it.
The host's podman client is stood in for by a script that prints as much as it is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from writerpool.config.hosts import parse_ssh_url
from writerpool.errors import WriterpoolError
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.remote import CLI_OUTPUT_MAX, RemotePodman
from writerpool.runtime.ssh import SshRoute


def _remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> RemotePodman:
    client = tmp_path / "podman"
    client.write_text(f"#!/bin/sh\nexec head -c {size} /dev/zero\n")
    client.chmod(0o755)
    monkeypatch.setenv("WRITERPOOL_PODMAN", str(client))
    target = parse_ssh_url("ssh://wp@th.test:22/run/user/1000/podman/podman.sock")
    ssh = SshRoute("th", target, tmp_path / "id", tmp_path / "known_hosts")
    return RemotePodman(ssh, tmp_path / "api.sock")


def test_an_answer_past_the_bound_is_refused_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = _remote(tmp_path, monkeypatch, CLI_OUTPUT_MAX + 1024 * 1024)
    with pytest.raises(WriterpoolError) as refused:
        remote.cli(["images", "--all", "--format", "json"])
    assert refused.value.code == "command_failed"
    assert "th.test" not in refused.value.message and "answered with over" in refused.value.message


def test_an_answer_within_the_bound_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = _remote(tmp_path, monkeypatch, 3 * 1024 * 1024).cli(["images"])
    assert len(done.stdout) == 3 * 1024 * 1024
    # This machine's own podman is not bounded (its answers are its own).
    local = LocalPodman(binary=str(tmp_path / "podman"))
    assert len(local.cli(["images"]).stdout) == 3 * 1024 * 1024
