"""`writerpool mode show`: the stored intent, and the `mode set` command that makes it.

A mode stores an image by its 64-hex ID. Where that ID is the newest image derived under
a name (`image derive NAME`), the name is shown beside it and the command says
`--image NAME`, which `mode set` turns into the same ID. An older image of a name keeps
its ID in the command: the name now picks another image.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from writerpool.config.modes import ModeEntry, load_modes
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.report import Report
from writerpool.state.images import ImageRecord, load_record


def image_names(paths: Paths) -> ImageRecord:
    """The record of derived images; an unreadable one names nothing here (IDs still show)."""
    try:
        return load_record(paths)
    except WriterpoolError:
        return ImageRecord()


def current_name(record: ImageRecord, image_id: str) -> str | None:
    """The name whose newest derived image is image_id: what `--image NAME` picks."""
    built = record.by_id().get(image_id)
    if built is None or built.kind != "derived" or built.name is None:
        return None
    newest = record.named(built.name)
    return built.name if newest is not None and newest.id == image_id else None


def reproduce(alias: str, entry: ModeEntry, record: ImageRecord | None = None) -> str:
    """The exact `mode set` command line that stores `entry` (without --apply); with the
    record, a derived image is named by the name that picks it."""
    words = ["writerpool", "mode", "set", alias, entry.mode]
    if entry.mode == "host":
        words.append("--accept-host-writes")
    settings = entry.container
    if settings is not None:
        name = current_name(record, settings.image) if record is not None else None
        words += ["--profiles", ",".join(settings.profiles), "--writers", str(settings.writers)]
        words += ["--lifecycle", settings.lifecycle, "--image", name or settings.image]
        words += ["--network", settings.network, "--tags", settings.tags]
        words += ["--cache", settings.cache, "--base", settings.base]
        if settings.allow:
            words += ["--allow", ",".join(settings.allow)]
        if settings.warm_hosts:
            words += ["--warm", ",".join(f"{h}={n}" for h, n in settings.warm_hosts.items())]
        elif settings.warm:
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
        out.update(entry.container.model_dump(mode="json", by_alias=True, exclude_none=True))
        if not entry.container.warm:
            del out["warm"]  # the default: entries stored before the setting read the same
    return out


def _word(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def reproduce_for(paths: Paths, alias: str) -> str | None:
    entry = load_modes(paths).workspaces.get(alias)
    return None if entry is None else reproduce(alias, entry, image_names(paths))


def _image_words(record: ImageRecord, image_id: str) -> tuple[str, str | None]:
    """How the message shows the stored image, and the derived name it was made under."""
    built = record.by_id().get(image_id)
    name = built.name if built is not None and built.kind == "derived" else None
    if name is None:
        return image_id, None
    if current_name(record, image_id) == name:
        return f"{name} ({image_id})", name
    newest = record.named(name)
    now = f"now names {newest.id[:12]}" if newest is not None else "names nothing now"
    return f"{image_id} (derived as {name}, which {now})", name


def show_modes(
    paths: Paths, workspaces: list[str], alias: str | None, agents: Mapping[str, str] | None = None
) -> Report:
    """`agents`: each configured profile's agent (shown for the profiles a mode names)."""
    report = Report("mode show")
    stored = load_modes(paths).workspaces
    record = image_names(paths)
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
        command = reproduce(name, entry, record)
        shown = intent(entry)
        extra: dict[str, str] = {}
        if entry.container is not None:
            shown["image"], image_name = _image_words(record, entry.container.image)
            if image_name is not None:
                extra["imageName"] = image_name
            named = [f"{p}={(agents or {}).get(p, '?')}" for p in entry.container.profiles]
            shown["agents"] = extra["agents"] = ",".join(named)
        settings = ", ".join(f"{k} {_word(v)}" for k, v in shown.items() if k != "mode")
        report.add("mode_stored", "ok", target,
                   f"mode {entry.mode}" + (f": {settings}" if settings else "")
                   + f"\n       set by: {command} --apply",
                   command=command, intent=intent(entry), **extra)  # fmt: skip
        rows.append({"workspace": name, "stored": intent(entry), "command": command, **extra})
    report.data["workspaces"] = rows
    return report
