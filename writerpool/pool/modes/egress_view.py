"""`writerpool egress check` and `egress log`: what a workspace's allowlist lets through
(its configured entries, and the session-scoped ones of its writers' running sessions),
and what a writer's allowlist proxy decided."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

from writerpool.audit import iso_time
from writerpool.config.allow_entry import Scheme, normalize_host, parse_entry
from writerpool.config.models import Config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.egress import grants
from writerpool.egress.allowlist import Allowlist, Decision, admitting_entry, expand
from writerpool.egress.connect_model import split_authority, split_target
from writerpool.egress.derived import derived_sets, known_sets
from writerpool.egress.resolve import Lookup, Resolution, resolve, system_lookup
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.provision.listing import unknown_writer, writer_names
from writerpool.report import Report

LOG_TAIL_BYTES = 4 * 1024 * 1024  # of the audit log, read from its end
LOG_LINES = 50


def parse_target(text: str) -> tuple[str, int, Scheme]:
    """`host`, `host:port`, `[v6]:port` or `http://host[:port]` into its parts."""
    word = text.strip()
    plain = word.startswith("http://")
    target = split_target("GET" if plain else "CONNECT", f"{word}/" if plain else word)
    name = normalize_host(target[0]) if target is not None and word.isascii() else None
    if target is None or name is None:
        shown = "".join(c for c in text[:80] if c.isprintable())
        raise UsageError(f"{shown!r} is not HOST, HOST:PORT or http://HOST[:PORT]")
    return name, target[1], target[2]


def check(
    config: Config, paths: Paths, alias: str, target: str, lookup: Lookup = system_lookup,
    now: Callable[[], float] = time.time,
) -> Report:  # fmt: skip
    """What the workspace's allowlist proxy would do with `target`: the name decided as
    it decides (configured entries, then a writer's session-scoped ones), then resolved as
    it resolves (`egress.resolve`, the same function, on this host) and every answer
    judged; a name that does not resolve here is said so."""
    report = Report("egress check")
    if alias not in config.workspaces:
        raise UsageError(f"workspace {alias!r} is not configured", code="alias_unknown")
    host, port, scheme = parse_target(target)
    where = f"egress/{alias}/{host}:{port}"
    entry = load_modes(paths).workspaces.get(alias)
    words = entry.container.allow if entry and entry.container else None
    if not words:
        report.add("egress_check_denied", "error", where,
                   f"{host}:{port} is not allowed: workspace {alias} has no allowlist",
                   remedy=f"writerpool mode set {alias} container ... --allow {host}",
                   reason="no_allowlist")  # fmt: skip
        return report
    sets = known_sets(config)
    entries, origin = expand(words, sets, sets.why_empty)
    allowlist = Allowlist(entries)
    decision = allowlist.decide(host, port, scheme)
    scoped = None if decision.allowed else _session_scoped(paths, alias, allowlist, target, now)
    if scoped is not None:
        allowlist, decision, scope = scoped
    if not decision.allowed:
        fix = admitting_entry(host, port, scheme, decision.reason)
        report.add("egress_check_denied", "error", where,
                   f"{host}:{port} is not allowed ({decision.reason})",
                   remedy=_add_remedy(alias, fix), reason=decision.reason,
                   admit=fix)  # fmt: skip
        return report
    via = decision.entry or ""
    named = origin.get(via, ())
    told = [f"{n}: {sets.derived[n].source}" if n in sets.derived else n for n in named]
    source = f"entry {via}" + (f" (from set {'; '.join(told)})" if named else "")
    if scoped is not None:
        source = f"session-scoped entry {via} ({scope['text']})"
    found = resolve(host, port, config.egress.resolve, allowlist.ranges, lookup)
    _judged(report, where, (host, port, scheme), source, found, alias)
    report.findings[-1].data.update(entry=via, sets=list(named), **(scoped[2] if scoped else {}))
    return report


def _session_scoped(
    paths: Paths, alias: str, allowlist: Allowlist, target: str, now: Callable[[], float]
) -> tuple[Allowlist, Decision, dict[str, str]] | None:
    """The first writer of `alias` whose running session holds a live session-scoped
    entry admitting `target`: the allowlist its proxy decides with, the decision, and
    which writer's session until when."""
    host, port, scheme = parse_target(target)
    for owner, name in writer_names(paths):  # bounded: the writers of this machine
        if owner != alias:
            continue
        try:
            found = grants.read(paths.writer_record(name).egress_grants)
        except WriterpoolError:
            continue
        live = found.live(now()) if found is not None else ()
        widened = Allowlist((*allowlist.entries, *(parse_entry(g.entry) for g in live)))
        decision = widened.decide(host, port, scheme)
        grant = next((g for g in live if g.entry == decision.entry), None)
        if decision.allowed and grant is not None and found is not None:
            until = iso_time(grant.until)
            text = f"writer {name}'s session {found.session}, until {until}, added by {grant.by}"
            scope = {"scope": "session", "writer": name, "until": until, "text": text}
            return widened, decision, scope
    return None


_FROM = {"address": "an address", "map": "[egress.resolve]",
         "resolver": "this host's resolver, as the proxy asks it"}  # fmt: skip


def _judged(
    report: Report, where: str, target: tuple[str, int, Scheme], source: str,
    found: Resolution, alias: str,
) -> None:  # fmt: skip
    """The finding for a listed name: allowed, refused on its answers, or unresolved."""
    host, port, scheme = target
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    answers = ", ".join(f"{j.address}" + (f" refused: {j.refusal}" if j.refusal else "")
                        for j in found.judged)  # fmt: skip
    addresses = [{"address": str(j.address), "refusal": j.refusal} for j in found.judged]
    if found.failure is not None:
        report.add("egress_check_unresolved", "error", where,
                   f"{shown} is listed by {source}, but {host} does not resolve on this host "
                   f"({found.failure}): the proxy asks the same resolver and would answer "
                   "502 resolve_failed", reason="resolve_failed",
                   remedy=f"if only another resolver knows {host}, map it in [egress.resolve]",
                   addresses=[])  # fmt: skip
        return
    refused = found.refused
    if refused is not None and refused.refusal is not None:
        fix = admitting_entry(host, port, scheme, refused.refusal, str(refused.address))
        report.add("egress_check_denied", "error", where,
                   f"{shown} is listed by {source} but every answer from {_FROM[found.source]} "
                   f"is refused ({answers})", remedy=_add_remedy(alias, fix),
                   reason=refused.refusal, address=str(refused.address), admit=fix,
                   addresses=addresses)  # fmt: skip
        return
    report.add("egress_check_allowed", "ok", where,
               f"{shown} is allowed by {source}; answers from {_FROM[found.source]}: "
               f"{answers}; the proxy connects to {found.usable[0]}",
               addresses=addresses)  # fmt: skip


def _add_remedy(alias: str, entry: str | None) -> str:
    if entry is None:
        return ""
    return f"add {entry} to the --allow list of workspace {alias} (writerpool mode set)"


def set_report(config: Config) -> Report:
    """Every set an allowlist may name: the configuration's, and the derived ones with
    the hosts they name on this host now and where those came from."""
    report = Report("egress sets")
    for name, configured in config.egress.sets.items():
        report.add("egress_set_shown", "ok", f"egress/sets/{name}",
                   f"{name}: {', '.join(configured.hosts)} (from [egress.sets.{name}])",
                   hosts=list(configured.hosts), source="config")  # fmt: skip
    for name, found in derived_sets().items():
        hosts = ", ".join(found.hosts) or "no host"
        report.add("egress_set_shown", "ok" if found.hosts else "warning",
                   f"egress/sets/{name}", f"{name}: {hosts} (from {found.source})",
                   remedy=known_sets(config).why_empty(name) if not found.hosts else "",
                   hosts=list(found.hosts), source=found.source)  # fmt: skip
    return report


def _tail_lines(paths: Paths) -> list[bytes]:
    try:
        fd = os.open(paths.audit_log, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - LOG_TAIL_BYTES))
        data = handle.read(LOG_TAIL_BYTES)
    lines = data.split(b"\n")
    return lines[1:] if size > LOG_TAIL_BYTES else lines  # the first may be cut


def log(paths: Paths, name: str, limit: int = LOG_LINES) -> Report:
    """The writer's most recent allowlist-proxy decisions from the audit log's tail."""
    if name not in {n for _, n in writer_names(paths)}:
        raise unknown_writer(paths, name)
    report = Report("egress log")
    rows: list[dict[str, Any]] = []
    for raw in _tail_lines(paths):  # bounded: LOG_TAIL_BYTES of lines
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or line.get("writer") != name:
            continue
        if line.get("action") == "egress_connect":
            rows.append({**line, "admit": admitting(line)})
        elif line.get("action") == "egress_allow":  # a session-scoped entry was added
            rows.append(line)
    rows = rows[-limit:]
    report.data["decisions"] = rows
    if not rows:
        report.add("egress_log_empty", "ok", f"writer/{name}",
                   "no allowlist-proxy decision recorded for this writer")  # fmt: skip
        return report
    text = "\n".join(_row(r) for r in rows)
    report.add("egress_log_shown", "ok", f"writer/{name}",
               f"{len(rows)} recent decision(s), oldest first:\n{text}")  # fmt: skip
    return report


def _row(line: dict[str, Any]) -> str:
    if line.get("action") == "egress_allow":
        return (f"  {line.get('time', '?')} ADDED   {line.get('entry', '?')} for session "
                f"{line.get('session', '?')}, session-scoped until {line.get('until', '?')} "
                f"(by {line.get('by', '?')})")  # fmt: skip
    allowed = line.get("decision") == "allowed"
    verdict = "allowed" if allowed else "DENIED "
    entry = ""
    if line.get("entry"):
        entry = f" by {line['entry']}" if allowed else f" (listed as {line['entry']})"
        if line.get("scope") == "session":
            entry += f" (session-scoped until {line.get('until', '?')})"
    address = f" {line['address']}" if line.get("address") else ""
    sni = f" tls name {line['sni']}" if line.get("sni") else ""
    admit = f"; to admit it add {line['admit']} to --allow" if line.get("admit") else ""
    size = f" up {line.get('bytesUp', 0)} B, down {line.get('bytesDown', 0)} B"
    return (f"  {line.get('time', '?')} {verdict} {line.get('method', '?')} "
            f"{line.get('destination', '?')}: {line.get('reason', '?')}{address}{sni}{entry}"
            f"{admit};{size}")  # fmt: skip


def admitting(line: dict[str, Any]) -> str | None:
    """The entry that would admit a denied decision of the audit log, if one would."""
    destination, reason, address = line.get("destination"), line.get("reason"), line.get("address")
    if line.get("decision") != "denied" or not isinstance(destination, str):
        return None
    scheme: Scheme = "https" if line.get("method") == "CONNECT" else "http"
    parts = split_authority(destination, 443 if scheme == "https" else 80)
    if parts is None or not isinstance(reason, str):
        return None
    return admitting_entry(*parts, scheme, reason, address if isinstance(address, str) else None)
