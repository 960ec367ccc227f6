"""The host a named writer lives on, for the commands that operate on one writer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.provision.writer_ref import WRITER_NAME
from writerpool.runtime.host import LOCAL, WriterHost
from writerpool.runtime.hosts import WriterHosts
from writerpool.state.writer import load_state


def host_name(paths: Paths, name: str) -> str:
    """The host the writer's state names; local for a name that names no writer or a
    writer without a readable state (the command then reports that itself)."""
    if not WRITER_NAME.fullmatch(name):
        return LOCAL
    with contextlib.suppress(WriterpoolError):
        state = load_state(paths.writer_dir(name))
        if state is not None:
            return state.host
    return LOCAL


@contextlib.contextmanager
def writer_host(paths: Paths, loaded: LoadedConfig, name: str) -> Iterator[WriterHost]:
    """The writer's host for the block: a host over SSH is connected first, so one that
    cannot be reached refuses the command (writer_host_unreachable) before it changes
    anything."""
    with WriterHosts(loaded.config.hosts) as hosts:
        yield hosts.get(host_name(paths, name))
