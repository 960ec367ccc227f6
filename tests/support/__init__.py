"""Helpers shared by tests: tool requirements and an isolated environment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

IDENTITY = {
    "GIT_AUTHOR_NAME": "Writerpool Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Writerpool Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def require_tool(name: str) -> None:
    """Skip when `name` is missing, or fail when WRITERPOOL_REQUIRE_PODMAN=1 (CI)."""
    if shutil.which(name):
        return
    if os.environ.get("WRITERPOOL_REQUIRE_PODMAN") == "1":
        pytest.fail(f"{name} is required but not installed")
    pytest.skip(f"{name} is not installed")


def isolate_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point HOME and XDG directories at tmp_path; git gets no system or user config."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CACHE_HOME", ".cache"), ("XDG_DATA_HOME", ".local/share")):
        monkeypatch.setenv(var, str(home / sub))
    global_config = home / "gitconfig"
    global_config.write_text("")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    monkeypatch.setenv("LC_ALL", "C")
    for var, value in IDENTITY.items():
        monkeypatch.setenv(var, value)
    return home
