"""A state's controller id (state/controller.py): made once, kept, its own per state
directory, and a malformed file refused rather than replaced."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.state.controller import FILE, controller_id


def _paths(root: Path) -> Paths:
    return Paths(root / "config.toml", root / "state", root / "cache")


def test_the_id_is_made_once_and_kept(tmp_path: Path) -> None:
    first = controller_id(_paths(tmp_path))
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert controller_id(_paths(tmp_path)) == first
    assert [p.name for p in (tmp_path / "state").iterdir()] == [FILE]  # no temporary left
    assert controller_id(_paths(tmp_path / "other")) != first


def test_a_malformed_id_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / FILE).write_text("not an id\n")
    with pytest.raises(WriterpoolError) as refused:
        controller_id(_paths(tmp_path))
    assert refused.value.code == "state_id_invalid"
    assert (tmp_path / "state" / FILE).read_text() == "not an id\n"


def test_a_link_in_place_of_the_id_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "planted"
    elsewhere.write_text("0123456789abcdef\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / FILE).symlink_to(elsewhere)
    with pytest.raises(WriterpoolError) as refused:
        controller_id(_paths(tmp_path))
    assert refused.value.code == "state_id_invalid"


def test_a_state_directory_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file where the directory should be\n")
    with pytest.raises(WriterpoolError) as refused:
        controller_id(_paths(tmp_path))
    assert refused.value.code == "state_id_invalid"
