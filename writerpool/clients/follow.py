"""`service start --port N`: the HTTP registrations writerpool owns follow the service
to its new URL (each removed and added again under the ownership record's rules); the
client's token stays. A registration changed since writerpool added it stays as it is."""

from __future__ import annotations

from dataclasses import replace

from writerpool.clients import codex_config, http
from writerpool.clients.model import SERVER_NAME, parse_target
from writerpool.clients.ownership import OwnedRegistration, entry_for, load_record, locked
from writerpool.clients.service import (
    add_registration,
    context,
    divergent,
    remove_registration,
)
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.report import Report


def follow_service(paths: Paths, report: Report) -> None:
    """Move every owned HTTP registration to the URL the service reports now."""
    url = str(report.data["url"])
    with locked(paths):
        for owned in load_record(paths).registrations:  # bounded by the record
            if owned.url is None or owned.url == url:
                continue
            where = f"client/{owned.target.replace(':', '/')}"
            try:
                _move(paths, owned, url, report)
            except WriterpoolError as exc:
                report.add(exc.code, "error", where, exc.message,
                           remedy=f"writerpool register {owned.target} --http --apply")  # fmt: skip


def _move(paths: Paths, owned: OwnedRegistration, url: str, report: Report) -> None:
    target = parse_target(owned.target, owned.project)
    if codex_config.prompts_approved(owned.settings):
        target = replace(target, approve_prompts=True)
    old = context(paths, target, None, "", owned.registration(), report)
    observed = old.read()
    if observed is None or not old.matches(observed, owned.registration()):
        if observed is not None:
            divergent(old, observed, "warning")
        return
    remove_registration(old, load_record(paths), revoke=False)
    new = context(paths, target, old.adapter, "", http.desired(paths, target, url), report)
    pending = load_record(paths).with_entry(entry_for(target, SERVER_NAME, new.wanted, "pending"))
    add_registration(new, pending)
