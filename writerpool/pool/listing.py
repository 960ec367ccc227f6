"""Reading writers for people: `writer list` and `writer verify`."""

from __future__ import annotations

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import load_modes
from writerpool.config.network import classification, describe
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.gitops.verify import verify_clone
from writerpool.pool.acceptance import readiness
from writerpool.pool.baseline import writer_problems
from writerpool.pool.container import writer_layout
from writerpool.pool.lease import Lease
from writerpool.pool.provision import MAX_WRITERS, writer_name
from writerpool.report import Report
from writerpool.runtime.podman import Podman
from writerpool.state.writer import WriterState, load_state


def writer_names(paths: Paths) -> list[tuple[str, str]]:
    """(alias, name) of every writer that has a directory, in order."""
    found: list[tuple[str, str]] = []
    if not paths.writers_dir.is_dir():
        return found
    # A removed writer leaves its lease file only: that is no writer.
    present = {
        p.name
        for p in paths.writers_dir.iterdir()
        if p.is_dir() and any(c.name != "lease" for c in p.iterdir())
    }
    aliases = sorted({n.rsplit("-w", 1)[0] for n in present if "-w" in n})
    for alias in aliases:
        for index in range(1, MAX_WRITERS + 1):
            if writer_name(alias, index) in present:
                found.append((alias, writer_name(alias, index)))
    return found


def _baseline(
    paths: Paths, podman: Podman, loaded: LoadedConfig, state: WriterState
) -> list[str] | None:
    """Why the writer is not at its baseline (the session guard's definition); None when
    a session or an operator command holds it. The lease is only tested, never kept:
    listing must not make a session start find the writer busy."""
    lease = Lease(paths.writer_dir(state.name))
    try:
        lease.acquire(wait=0)
    except WriterpoolError:
        return None
    lease.release()
    try:
        return writer_problems(paths, podman, state, loaded.config.pool)
    except WriterpoolError as exc:
        return [f"the clone could not be inspected ({exc.code})"]


def list_writers(paths: Paths, podman: Podman, loaded: LoadedConfig) -> Report:
    report = Report("writer list")
    rows = []
    for alias, name in writer_names(paths):
        target = f"writer/{alias}/{name}"
        try:
            state = load_state(paths.writer_dir(name))
        except WriterpoolError as exc:
            report.add(exc.code, "error", target, exc.message)
            continue
        if state is None:
            if writer_layout(paths, name)["clone"].exists():
                report.add(
                    "writer_state_missing",
                    "error",
                    target,
                    "a clone without a usable state.json; nothing will overwrite it",
                    remedy=f"copy what you need out of it, then writerpool writer remove {name} "
                    "--discard",
                )
            continue
        phase, reason = readiness(paths, podman, state, loaded.config.pool)
        problems = _baseline(paths, podman, loaded, state)
        rows.append(
            {
                "name": name,
                "workspace": alias,
                "phase": phase,
                "reason": reason,
                "base": state.base.name,
                "lifecycle": state.lifecycle,
                "network": state.network,
                "networkClass": classification(state.network),
                "atBaseline": None if problems is None else not problems,
                "notAtBaseline": problems or [],
            }
        )
        text = f"{phase}" + (f" ({reason})" if reason else "") + f", base {state.base.name}"
        text += f", network {describe(state.network)}"
        if problems is None:
            text += "; in use, content not inspected"
        elif problems:
            text += "; not at baseline: " + "; ".join(problems)[:300]
        good = phase == "ready" and not problems
        report.add("writer_status", "ok" if good else "warning", target, text)
    report.data["writers"] = rows
    return report


def verify_writer(paths: Paths, podman: Podman, loaded: LoadedConfig, name: str) -> Report:
    report = Report("writer verify")
    alias = name.rsplit("-w", 1)[0]
    target = f"writer/{alias}/{name}"
    if (alias, name) not in writer_names(paths):
        raise UsageError(f"no writer named {name!r}", code="writer_unknown")
    entry = load_modes(paths).workspaces.get(alias)
    if entry is None or entry.mode != "container":
        report.add(
            "writer_settings_changed", "warning", target, "its workspace is not in container mode"
        )
    state = load_state(paths.writer_dir(name))
    if state is None:  # removed: only its lease file is left
        raise UsageError(f"no writer named {name!r}", code="writer_unknown")
    problems = verify_clone(writer_layout(paths, name)["clone"])
    if problems:
        report.add("clone_verification_failed", "error", target, ", ".join(problems))
    phase, reason = readiness(paths, podman, state, loaded.config.pool)
    if phase != "ready":
        report.add(reason or "writer_not_ready", "error", target, f"writer is {phase}")
    if not report.has_error():
        report.add("writer_verified", "ok", target, "state, clone and readiness check out")
    return report
