"""Reading `name=value` lines from a turn's tool results (tests/e2e/pool_support.py),
also where an agent put a line of stderr around one of stdout."""

from __future__ import annotations

import pytest

from tests.e2e.pool_support import result_value

# As Codex gave it once: `touch`'s stderr came in two writes, stdout's line between them.
INTERLEAVED = (
    "Output:\ncommit=54065af\ntouch: home-exit=1\n"
    "cannot touch '/home/agent/.codex/planted': Read-only file system\ntmp-exit=0\n"
)


def test_a_value_inside_a_line_of_stderr_is_found() -> None:
    assert result_value(INTERLEAVED, "home-exit") == "1"
    assert result_value(INTERLEAVED, "tmp-exit") == "0"


def test_a_line_starting_with_the_name_wins_and_a_longer_name_is_not_it() -> None:
    assert result_value("x: exit=9\nexit=5\nhome-exit=1\n", "exit") == "5"
    assert result_value("subject=feature from codex\n", "subject") == "feature from codex"
    with pytest.raises(AssertionError):
        result_value("home-exit=1\n", "exit")
