"""A spare egress process ended before any session took it says nothing: its server has
closed the pipes (supervisor._end_spare), so a word on stdout would only fail and print
a broken pipe on the operator's terminal."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_spare_ended_unused_exits_quietly_with_its_stdout_closed() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the server closed its end, as _end_spare does
    done = subprocess.run(
        [sys.executable, "-m", "writerpool.egress.worker"],
        stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE, timeout=60,
    )  # fmt: skip
    os.close(write_end)
    assert (done.returncode, done.stderr) == (0, b"")
