"""`writerpool uninstall`'s part in the clients: every registration writerpool's ownership
record proves it added is removed (or, planning, named), through the client's own
command line as `register --remove` does. Registrations writerpool did not add stay."""

from __future__ import annotations

from writerpool.clients.model import parse_target
from writerpool.clients.ownership import load_record
from writerpool.clients.service import remove
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.report import Report

TARGET = "writerpool"  # the install as a whole, as uninstall's report names it


def remove_registrations(paths: Paths, apply: bool, report: Report) -> None:
    try:
        owned = load_record(paths).registrations
    except WriterpoolError as exc:
        report.add(exc.code, "warning", TARGET, f"the ownership record: {exc.message}")
        return
    for entry in owned:
        where = f"client/{entry.target}"
        if not apply:
            report.add("uninstall_planned", "planned", where,
                       "would remove the registration writerpool added")  # fmt: skip
            continue
        try:
            target = parse_target(entry.target, entry.project)
            report.findings.extend(remove(paths, target).findings)
        except WriterpoolError as exc:
            report.add(exc.code, "warning", where, f"left registered: {exc.message}")
