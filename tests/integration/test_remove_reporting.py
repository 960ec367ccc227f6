"""`writer remove` never follows a failure with a line saying the writer was removed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, make_checkout, wp, write_config
from writerpool.config.paths import Paths

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]

HOLDER = """
import sys, time
from pathlib import Path
from writerpool.pool.writer.lease import Lease
lease = Lease(Path(sys.argv[1]))
lease.acquire(wait=5)
print("held", flush=True)
time.sleep(600)
"""


def test_removing_a_busy_writer_reports_busy_only_and_deletes_nothing(
    tmp_path: Path, image_pin: Path
) -> None:
    write_config(make_checkout(tmp_path / "checkout", commits=2))
    wp("control", "--apply", check=True)
    wp("mode", "set", "demo", "container", "--profiles", "code", "--apply", check=True)
    wdir = Paths.from_env().writer_dir("demo-w1")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(wdir)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        code, report = wp("writer", "remove", "demo-w1", "--discard", "--apply")
        assert (code, codes(report)) == (1, ["writer_busy"])
        assert report["ok"] is False
        assert (wdir / "state.json").is_file() and (wdir / "clone").is_dir()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    code, report = wp("writer", "remove", "demo-w1", "--discard", "--apply")
    assert (code, codes(report)) == (0, ["writer_removed"])
    assert not (wdir / "state.json").exists()
