"""The server's own descriptor limit: raised at start to what a full pool needs.

Each session's proxy runs in a process of its own with its own limits, so the
server holds only a few descriptors per session: pi's three pipes, its proxy
process's two, the writer's lease, Podman's and the audit log's in passing.
"""

from __future__ import annotations

import resource

# What the server holds without sessions (the MCP SDK, threads, logs, Podman's API).
BASE = 256
PER_SESSION = 16
# The sessions a full pool runs at once that the limit is sized for: writers and
# read-only sessions together.
POOL_SESSIONS = 128
# Never ask for more than this, whatever the hard limit allows.
CEILING = 65536


def needed(sessions: int = POOL_SESSIONS) -> int:
    return BASE + PER_SESSION * sessions


def hard_limit() -> int:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return CEILING if hard == resource.RLIM_INFINITY else min(hard, CEILING)


def raise_to_hard() -> int:
    """Raise this process's soft descriptor limit to the hard one; returns the new soft."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = max(soft, hard_limit())
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target
