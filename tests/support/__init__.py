"""Helpers shared by tests."""

from __future__ import annotations

import shutil

import pytest

# Fixed identity and dates for commits tests make, so commit ids are reproducible.
IDENTITY = {
    "GIT_AUTHOR_NAME": "Writerpool Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Writerpool Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def require_tool(name: str) -> None:
    """Skip when `name` is missing (tests/conftest.py turns that skip into a failure
    under WRITERPOOL_REQUIRE_PODMAN=1)."""
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed")
