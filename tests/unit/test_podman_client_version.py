"""The local Podman's version is read from `podman --version`, which starts no runtime:
`podman version` takes the image store's lock first and waits while another process
writes a layer (a session's start waited out its 30 s on it in a full run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from writerpool.runtime.local import LocalPodman


def test_the_version_is_read_without_starting_podmans_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "podman"
    # `version` fails here as one stuck on the store's lock would, after its timeout.
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "podman version 5.4.2" && exit 0\n'
                    "echo 'waited on the store' >&2; exit 125\n")  # fmt: skip
    fake.chmod(0o755)
    monkeypatch.setenv("WRITERPOOL_PODMAN", str(fake))
    assert LocalPodman().version() == "5.4.2"
