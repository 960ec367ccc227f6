"""A writer's lease held by another process refuses a second holder with writer_busy, and
the kernel frees it the moment that process is killed (SIGKILL: no cleanup runs). The
lease is a file lock in the writer's record directory; no container is involved."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from writerpool.errors import WriterpoolError
from writerpool.pool.writer.lease import Lease

HOLDER = """
import sys, time
from pathlib import Path
from writerpool.pool.writer.lease import Lease
lease = Lease(Path(sys.argv[1]))
lease.acquire(wait=5)
print("held", flush=True)
time.sleep(600)
"""


def test_lease_busy_then_freed_by_sigkill(tmp_path: Path) -> None:
    wdir = tmp_path / "writers" / "demo-w1"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(wdir)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(WriterpoolError) as busy:
            Lease(wdir).acquire(wait=0.1)
        assert busy.value.code == "writer_busy"
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        lease = Lease(wdir)
        lease.acquire(wait=0)  # freed at once by the kernel
        assert lease.held
        lease.release()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
