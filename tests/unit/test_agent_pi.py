"""PiAgent's start failures, with real processes that are not pi."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from writerpool.agent.pi import PiAgent
from writerpool.errors import WriterpoolError

ENV = {"PATH": "/usr/bin:/bin"}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_missing_executable_fails_to_start() -> None:
    with pytest.raises(WriterpoolError) as err:
        PiAgent.start(["/nonexistent/pi", "--mode", "rpc"], ENV, None, ready_timeout=5)
    assert err.value.code == "session_start_failed"


def test_process_that_exits_at_once_fails_to_start() -> None:
    with pytest.raises(WriterpoolError) as err:
        PiAgent.start(["/bin/sh", "-c", "echo oops >&2; exit 3"], ENV, None, ready_timeout=30)
    assert err.value.code == "session_start_failed"
    assert "exited" in err.value.message


def test_process_that_never_answers_times_out_and_is_ended(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # exec: the shell becomes sleep, which ignores stdin and so outlives its close.
    argv = ["/bin/sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"]
    with pytest.raises(WriterpoolError) as err:
        PiAgent.start(argv, ENV, None, ready_timeout=0.5)
    assert err.value.code == "session_start_failed"
    assert "did not answer" in err.value.message
    assert gone(int(pidfile.read_text()))
