"""A canary the local host plants in this account's home lasts for its block and goes with
the process that planted it, even killed (on a host over SSH:
tests/integration/test_remote_hostile.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from writerpool.runtime.hosts import open_host

PLANT_AND_WAIT = """
import time
from writerpool.runtime.hosts import open_host
with open_host().planted_canary() as canary:
    print(canary.directory, flush=True)
    time.sleep(600)
"""


def test_the_canary_is_private_in_the_home_and_gone_after_its_block() -> None:
    with open_host().planted_canary() as canary:
        directory = Path(canary.directory)
        assert Path(canary.file).read_text() == "writerpool canary\n"
        assert directory.parent == Path.home() and canary.home == str(Path.home())
        assert directory.stat().st_mode & 0o777 == 0o700
    assert not directory.exists()


def test_a_killed_planter_leaves_no_canary_behind() -> None:
    planter = subprocess.Popen([sys.executable, "-c", PLANT_AND_WAIT], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    try:
        assert planter.stdout is not None
        directory = Path(planter.stdout.readline().strip())
        assert (directory / "secret").is_file()
    finally:
        planter.kill()
        planter.wait()
        if planter.stdout is not None:
            planter.stdout.close()
    for _ in range(60):  # bounded: 30 s for the holder to see its stdin end
        if not directory.exists():
            break
        threading.Event().wait(0.5)
    assert not directory.exists(), "the canary outlived the process that planted it"
