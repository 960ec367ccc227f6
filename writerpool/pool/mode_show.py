"""`writerpool mode show`: the stored intent, and the `mode set` command that makes it."""

from __future__ import annotations

import shlex

from writerpool.config.modes import ModeEntry, load_modes
from writerpool.config.paths import Paths
from writerpool.errors import UsageError
from writerpool.report import Report


def reproduce(alias: str, entry: ModeEntry) -> str:
    """The exact `mode set` command line that stores `entry` (without --apply)."""
    words = ["writerpool", "mode", "set", alias, entry.mode]
    if entry.mode == "host":
        words.append("--accept-host-writes")
    settings = entry.container
    if settings is not None:
        words += ["--profiles", ",".join(settings.profiles), "--writers", str(settings.writers)]
        words += ["--lifecycle", settings.lifecycle, "--image", settings.image]
        words += ["--network", settings.network, "--tags", settings.tags]
        words += ["--cache", settings.cache, "--base", settings.base]
        if settings.allow:
            words += ["--allow", ",".join(settings.allow)]
        if settings.warm:
            words += ["--warm", str(settings.warm)]
        if settings.hosts:
            words += ["--hosts", ",".join(settings.hosts)]
    return shlex.join(words)


def intent(entry: ModeEntry) -> dict[str, object]:
    """The stored entry as JSON (container settings flattened beside the mode)."""
    out: dict[str, object] = {"mode": entry.mode}
    if entry.mode == "host":
        out["acceptHostWrites"] = True
    if entry.container is not None:
        out.update(entry.container.model_dump(mode="json", exclude_none=True))
        if not entry.container.warm:
            del out["warm"]  # the default: entries stored before the setting read the same
    return out


def _word(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def reproduce_for(paths: Paths, alias: str) -> str | None:
    entry = load_modes(paths).workspaces.get(alias)
    return None if entry is None else reproduce(alias, entry)


def show_modes(paths: Paths, workspaces: list[str], alias: str | None) -> Report:
    report = Report("mode show")
    stored = load_modes(paths).workspaces
    if alias is not None and alias not in workspaces and alias not in stored:
        known = ", ".join(sorted(set(workspaces) | set(stored))) or "none"
        raise UsageError(f"workspace {alias!r} is not configured (known: {known})",
                         code="alias_unknown")  # fmt: skip
    rows: list[dict[str, object]] = []
    for name in [alias] if alias else sorted(set(workspaces) | set(stored)):
        target = f"modes/workspace/{name}"
        entry = stored.get(name)
        if entry is None:
            report.add(
                "mode_default",
                "ok",
                target,
                "no mode stored: coding sessions run on the host checkout (the default)",
            )
            rows.append({"workspace": name, "stored": None, "command": None})
            continue
        command = reproduce(name, entry)
        settings = ", ".join(f"{k} {_word(v)}" for k, v in intent(entry).items() if k != "mode")
        report.add("mode_stored", "ok", target,
                   f"mode {entry.mode}" + (f": {settings}" if settings else "")
                   + f"\n       set by: {command} --apply",
                   command=command, intent=intent(entry))  # fmt: skip
        rows.append({"workspace": name, "stored": intent(entry), "command": command})
    report.data["workspaces"] = rows
    return report
