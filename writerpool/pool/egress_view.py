"""`writerpool egress check` and `egress log`: what a workspace's allowlist lets through,
and what a writer's allowlist proxy decided."""

from __future__ import annotations

import json
import os
from typing import Any

from writerpool.config.allow_entry import Scheme, normalize_host, parse_address
from writerpool.config.models import Config
from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.egress.allowlist import Allowlist, address_refusal
from writerpool.egress.connect_model import split_target
from writerpool.egress.derived import resolve_allowlist
from writerpool.errors import UsageError
from writerpool.pool.listing import unknown_writer, writer_names
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


def check(config: Config, paths: Paths, alias: str, target: str) -> Report:
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
    entries, origin = resolve_allowlist(config, words)
    allowlist = Allowlist(entries)
    decision = allowlist.decide(host, port, scheme)
    if not decision.allowed:
        report.add("egress_check_denied", "error", where,
                   f"{host}:{port} is not allowed ({decision.reason})",
                   reason=decision.reason)  # fmt: skip
        return report
    via = decision.entry or ""
    sets = origin.get(via, ())
    source = f"entry {via}" + (f" (from set {', '.join(sets)})" if sets else "")
    mapped = config.egress.resolve.get(host)
    literal = parse_address(host)
    addresses = [literal] if literal else [a for a in map(parse_address, mapped or ()) if a]
    refusals = [address_refusal(a, allowlist.ranges) for a in addresses]
    if addresses and all(refusals):
        reason = next(r for r in refusals if r)
        report.add("egress_check_denied", "error", where,
                   f"{host}:{port} is listed by {source} but resolves to a refused "
                   f"address ({reason})", reason=reason, entry=via)  # fmt: skip
        return report
    note = "" if addresses else "; the proxy resolves it when asked and refuses private answers"
    report.add("egress_check_allowed", "ok", where, f"{host}:{port} is allowed by {source}{note}",
               entry=via, sets=list(sets))  # fmt: skip
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
        if isinstance(line, dict) and line.get("action") == "egress_connect" \
                and line.get("writer") == name:  # fmt: skip
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
    allowed = line.get("decision") == "allowed"
    verdict = "allowed" if allowed else "DENIED "
    entry = ""
    if line.get("entry"):
        entry = f" by {line['entry']}" if allowed else f" (listed as {line['entry']})"
    size = f" up {line.get('bytesUp', 0)} B, down {line.get('bytesDown', 0)} B"
    return (f"  {line.get('time', '?')} {verdict} {line.get('method', '?')} "
            f"{line.get('destination', '?')}: {line.get('reason', '?')}{entry};{size}")  # fmt: skip
