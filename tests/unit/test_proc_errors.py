"""proc's CommandFailed is an expected failure with a code, its message path-free."""

from __future__ import annotations

import errno

import pytest

from writerpool.errors import CODES, WriterpoolError, failure, is_disk_full
from writerpool.proc import CommandFailed, run


def test_a_timeout_is_command_timeout() -> None:
    with pytest.raises(WriterpoolError) as caught:
        run(["sleep", "5"], timeout=0.2)
    assert isinstance(caught.value, CommandFailed)
    assert caught.value.code == "command_timeout" and "timed out" in caught.value.message


def test_a_failed_command_is_command_failed_without_paths() -> None:
    script = "echo 'fatal: cannot open /home/someone/secret/file' >&2; exit 3"
    with pytest.raises(WriterpoolError) as caught:
        run(["sh", "-c", script])
    err = caught.value
    assert err.code == "command_failed" and err.code in CODES
    assert "exited 3" in err.message and "/home" not in err.message
    assert "fatal: cannot open <path>" in err.message


def test_a_missing_program_is_command_failed() -> None:
    with pytest.raises(CommandFailed) as caught:
        run(["/nonexistent/writerpool-test-binary"])
    assert caught.value.code == "command_failed" and caught.value.returncode == 127


def test_a_full_disk_is_named_as_such() -> None:
    full = CommandFailed(["git", "bundle"], 128, b"", b"fatal: No space left on device")
    assert is_disk_full(full)
    assert failure("writer_base_unavailable", "exporting failed", full).code == "disk_full"
    try:
        raise WriterpoolError("writer_clone_failed", "x") from OSError(errno.ENOSPC, "full")
    except WriterpoolError as exc:
        assert is_disk_full(exc)
    other = CommandFailed(["git"], 1, b"", b"fatal: bad object")
    assert failure("writer_base_unavailable", "exporting failed", other).code == (
        "writer_base_unavailable"
    )
