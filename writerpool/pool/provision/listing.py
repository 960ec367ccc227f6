"""Reading writers for people: `writer list` and `writer verify`."""

from __future__ import annotations

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.paths import BOOKKEEPING, Paths
from writerpool.errors import UsageError
from writerpool.pool.acceptance.accept import readiness
from writerpool.pool.provision.make import MAX_WRITERS, writer_name
from writerpool.pool.writer.inspect import VIEW, inspect_writer
from writerpool.report import Report
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import load_state


def writer_names(paths: Paths) -> list[tuple[str, str]]:
    """(alias, name) of every writer that has a directory, in order."""
    found: list[tuple[str, str]] = []
    if not paths.writers_dir.is_dir():
        return found
    # A removed writer leaves its lease files only: that is no writer.
    present = {
        p.name
        for p in paths.writers_dir.iterdir()
        if p.is_dir() and any(c.name not in BOOKKEEPING for c in p.iterdir())
    }
    aliases = sorted({n.rsplit("-w", 1)[0] for n in present if "-w" in n})
    for alias in aliases:
        for index in range(1, MAX_WRITERS + 1):
            if writer_name(alias, index) in present:
                found.append((alias, writer_name(alias, index)))
    return found


def unknown_writer(paths: Paths, name: str) -> UsageError:
    """writer_unknown, listing the writers that do exist."""
    known = ", ".join(n for _, n in writer_names(paths)) or "none"
    shown = "".join(c for c in name if c.isprintable())[:80]
    return UsageError(f"no writer named {shown!r} (writers: {known})", code="writer_unknown")


def verify_writer(paths: Paths, host: WriterHost, loaded: LoadedConfig, name: str) -> Report:
    report = Report("writer verify")
    alias = name.rsplit("-w", 1)[0]
    target = f"writer/{alias}/{name}"
    if (alias, name) not in writer_names(paths):
        raise unknown_writer(paths, name)
    entry = load_modes(paths).workspaces.get(alias)
    if entry is None or entry.mode != "container":
        report.add(
            "writer_settings_changed", "warning", target, "its workspace is not in container mode"
        )
    state = load_state(paths.writer_dir(name))
    if state is None:  # removed: only its lease file is left
        raise unknown_writer(paths, name)
    problems = inspect_writer(paths, host, state, loaded.config.pool, VIEW).clone_problems
    if problems:
        report.add("clone_verification_failed", "error", target, ", ".join(problems))
    phase, reason = readiness(paths, host, state, loaded.config)
    if phase != "ready":
        report.add(reason or "writer_not_ready", "error", target, f"writer is {phase}")
    if not report.has_error():
        report.add("writer_verified", "ok", target, "state, clone and readiness check out")
    return report
