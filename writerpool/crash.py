"""Named crash points for the crash-recovery regression suite.

With WRITERPOOL_CRASH_AT=<point>[,<point>...] in its environment, writerpool kills
itself with SIGKILL when it reaches that point, as a power cut or the OOM killer would: no
cleanup, no finally blocks. tests/integration/test_crash_points.py runs each point and
checks that state stays readable, the next run completes or refuses cleanly and no work
is lost. Unset (always, outside that suite), a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "WRITERPOOL_CRASH_AT"

POINTS = (
    "provision.state_recorded",  # the first state is written; no clone yet
    "provision.cloned",  # the clone exists; the state does not record it yet
    "acceptance.harness_ran",  # the harness ran; readiness is not recorded
    "mode_set.storing",  # the mode entry is about to be written
    "mode_set.stored",  # the entry is written; writers are not reconciled
    "collect.bundle_kept",  # the bundle is kept; nothing imported
    "collect.imported",  # refs are imported; the collection is not recorded
    "reset.tool_ran",  # the clone was reset in its container; not verified
    "reset.verified",  # verified; the new baseline is not recorded
    "recreate.cloned",  # the new clone exists; the state names the old baseline
    "finish.collected",  # finish collected; the reset has not started
)

# Points of `writerpool serve` and its egress processes, run by the session suite
# (tests/e2e/test_egress_sessions.py); a comma-separated list kills at each.
SERVER_POINTS = (
    "egress.proxy_started",  # a session's proxy process is started; its token not yet written
    "egress.worker_stopping",  # (in the egress process) stopping; its socket not yet removed
)


# A point of acceptance with everything it plants on the writer's host held (the canary,
# the loopback listener, the proxy's forwarded socket), run by
# tests/integration/test_remote_hostile.py on a host over SSH.
PROBE_POINTS = ("acceptance.probes_held",)


def crash_point(name: str) -> None:
    """SIGKILL this process when WRITERPOOL_CRASH_AT names this point."""
    if name in os.environ.get(ENV, "").split(","):
        os.kill(os.getpid(), signal.SIGKILL)
