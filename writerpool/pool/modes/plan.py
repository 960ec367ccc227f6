"""What a `mode set` changes, setting by setting (old → new), and which provisioning
setting a kept writer was made with differs from the request."""

from __future__ import annotations

from writerpool.config.modes import ContainerSettings, ModeEntry
from writerpool.pool.modes.show import intent
from writerpool.pool.provision.make import writer_name
from writerpool.report import Report, Status
from writerpool.state.writer import WriterState

UNSET = "(unset)"
# Settings a writer is provisioned with (provision.settings_digest): a change is never
# applied to a kept writer, which stays not ready until it is removed and re-provisioned.
PROVISIONING = ("image", "network", "cache", "tags")


def _word(value: object) -> str:
    if value is None:
        return UNSET
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def setting_changes(current: ModeEntry | None, entry: ModeEntry) -> list[tuple[str, str, str]]:
    """(setting, old, new) for every setting the entry changes, in a stable order."""
    old = intent(current) if current is not None else {}
    new = intent(entry)
    keys = ["mode", *[k for k in new if k != "mode"], *[k for k in old if k not in new]]
    return [(k, _word(old.get(k)), _word(new.get(k))) for k in keys if old.get(k) != new.get(k)]


def _writers_note(alias: str, old: str, new: str) -> str:
    before = int(old) if old.isdigit() else 0
    after = int(new) if new.isdigit() else 0
    if after > before:
        names = ", ".join(writer_name(alias, i) for i in range(before + 1, after + 1))
        return f" ({names} added)"
    names = ", ".join(writer_name(alias, i) for i in range(after + 1, before + 1))
    return f" ({names} removed)" if names else ""


def report_changes(
    report: Report, alias: str, current: ModeEntry | None, entry: ModeEntry, apply: bool
) -> None:
    target = f"modes/workspace/{alias}"
    status: Status = "ok" if apply else "planned"
    for key, old, new in setting_changes(current, entry):
        note = _writers_note(alias, old, new) if key == "writers" else ""
        verb = "" if apply else "would change "
        report.add("mode_setting_changed", status, target, f"{verb}{key}: {old} → {new}{note}",
                   setting=key, old=old, new=new)  # fmt: skip


def provisioning_differences(state: WriterState, settings: ContainerSettings) -> list[str]:
    """`setting old → new` for each provisioning setting the writer was made otherwise."""
    made = {"image": state.image, "network": state.network, "cache": state.cache,
            "tags": state.tags}  # fmt: skip
    wanted = settings.model_dump()
    return [f"{k} {made[k]} → {wanted[k]}" for k in PROVISIONING if made[k] != wanted[k]]
