"""A writer named on the command line: its name's form, its directory, its workspace's
checkout, and the findings an operator command reports on it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.provision.listing import unknown_writer
from writerpool.report import Report
from writerpool.state.writer import WriterState, load_state

WRITER_NAME = re.compile(r"([a-z][a-z0-9_-]{0,63})-w([1-9]|1[0-6])")


@dataclass(frozen=True)
class WriterRef:
    """A writer named on the command line that has a directory."""

    paths: Paths
    name: str
    alias: str

    @property
    def target(self) -> str:
        return f"writer/{self.alias}/{self.name}"

    def load(self) -> WriterState:
        state = load_state(self.paths.writer_dir(self.name))
        if state is None:
            raise WriterpoolError("writer_state_invalid", "the writer has no state file")
        return state


def find_writer(paths: Paths, name: str) -> WriterRef:
    match = WRITER_NAME.fullmatch(name)
    if match is None:
        raise UsageError("a writer name looks like ALIAS-wN (N from 1 to 16)")
    if not paths.writer_dir(name).is_dir():
        raise unknown_writer(paths, name)
    return WriterRef(paths, name, match.group(1))


@contextmanager
def findings_for(report: Report, target: str) -> Iterator[None]:
    """Report an expected failure as a finding on the writer (usage errors still exit 2)."""
    try:
        yield
    except UsageError:
        raise
    except WriterpoolError as exc:
        report.add(exc.code, "error", target, exc.message)


def workspace_repo(loaded: LoadedConfig, alias: str) -> Path:
    repo = loaded.config.workspaces.get(alias)
    if repo is None:
        raise UsageError(f"workspace {alias} is not configured", code="alias_unknown")
    return repo
