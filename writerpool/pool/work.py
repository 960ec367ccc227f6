"""Whether a writer holds work that no complete collection covers."""

from __future__ import annotations

from writerpool.config.paths import Paths
from writerpool.gitops.clone_read import read_refs
from writerpool.pool.container import writer_layout
from writerpool.state.writer import WriterState


def refs_moved(paths: Paths, state: WriterState) -> bool:
    """Branches, HEAD or stash differ from the baseline (read with dulwich, nothing run)."""
    if state.baseline is None:
        return False
    refs = read_refs(writer_layout(paths, state.name)["clone"])
    return (refs.stash or refs.head != state.baseline.head
            or dict(refs.branches) != state.baseline.branches)


def has_uncollected_work(paths: Paths, state: WriterState) -> bool:
    # A complete collection authorizes cleanup only while nothing moved since.
    if state.collection is not None and state.collection.complete:
        return False
    return refs_moved(paths, state)
