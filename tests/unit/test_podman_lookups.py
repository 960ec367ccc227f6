"""Podman lookups on a session start's path are not repeated needlessly: the client
version is asked again only when the executable changes, and a present image is
reused for a few seconds (an absent one never). A stand-in `podman` on PATH logs
every call it gets."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from writerpool.runtime import image
from writerpool.runtime.image import image_exists
from writerpool.runtime.local import LocalPodman

IMAGE_ID = "ab" * 32
OTHER_ID = "cd" * 32


def install_podman(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """A `podman` script first on PATH; returns the file its calls are logged to."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    script = bindir / "podman"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_the_version_is_asked_again_only_after_the_executable_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install_podman(tmp_path, monkeypatch, "echo 4.3.1")
    assert LocalPodman().version() == "4.3.1"
    assert LocalPodman().version() == "4.3.1"
    assert len(calls(log)) == 1
    # An upgrade replaces the executable: the next fingerprint sees the new version.
    install_podman(tmp_path, monkeypatch, "echo 5.0.10")
    assert LocalPodman().version() == "5.0.10"
    assert len(calls(log)) == 2


def test_a_podman_that_prints_nothing_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install_podman(tmp_path, monkeypatch, "true")
    assert LocalPodman().version() == ""
    assert LocalPodman().version() == ""
    assert len(calls(log)) == 2


def test_a_present_image_is_reused_briefly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = install_podman(tmp_path, monkeypatch, f'echo \'[{{"Id": "{IMAGE_ID}"}}]\'')
    monkeypatch.setattr(image, "_present_at", {})
    assert image_exists(IMAGE_ID)
    assert image_exists(IMAGE_ID)
    assert len(calls(log)) == 1
    # Past the reuse window Podman is asked again.
    monkeypatch.setattr(image, "EXISTS_REUSE_SECONDS", 0.0)
    assert image_exists(IMAGE_ID)
    assert len(calls(log)) == 2


def test_an_absent_image_is_asked_for_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = install_podman(tmp_path, monkeypatch, 'echo "Error: $5: image not known" >&2; exit 125')
    monkeypatch.setattr(image, "_present_at", {})
    assert not image_exists(OTHER_ID)
    assert not image_exists(OTHER_ID)
    assert len(calls(log)) == 2


def test_an_image_that_disappears_is_forgotten_once_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_podman(tmp_path, monkeypatch, f'echo \'[{{"Id": "{IMAGE_ID}"}}]\'')
    monkeypatch.setattr(image, "_present_at", {})
    assert image_exists(IMAGE_ID)
    log = install_podman(tmp_path, monkeypatch, 'echo "Error: image not known" >&2; exit 125')
    monkeypatch.setattr(image, "EXISTS_REUSE_SECONDS", 0.0)
    assert not image_exists(IMAGE_ID)
    monkeypatch.setattr(image, "EXISTS_REUSE_SECONDS", 5.0)
    assert not image_exists(IMAGE_ID)  # no stale "present" left behind
    assert len(calls(log)) == 3  # both scripts log to the same file
