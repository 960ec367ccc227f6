"""The host one writer is on, for a command that operates on that writer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from writerpool.config.hosts import LOCAL
from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.runtime.host import WriterHost
from writerpool.runtime.hosts import HostSet
from writerpool.state.writer import load_state


@contextmanager
def writer_host(paths: Paths, loaded: LoadedConfig, name: str) -> Iterator[WriterHost]:
    """The writer's own host (its state's `host`), connected for the block. Without a
    readable state naming another host it is the local one, and the command reports
    the state as it always does. A host that cannot be reached refuses before anything
    is done (writer_host_unreachable)."""
    try:
        state = load_state(paths.writer_dir(name))
    except (WriterpoolError, ValueError):
        state = None
    with HostSet(loaded.config.hosts) as hosts:
        yield hosts.get(state.host if state is not None else LOCAL)
