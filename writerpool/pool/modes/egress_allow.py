"""`writerpool egress allow WRITER HOST[:PORT] [--for 30m]`: approve on deny, for the
session. The entry goes to the writer's session-scoped entries (`egress.grants`), which
its live allowlist proxy reads at its next decision; the audit log says who added it and
until when. Nothing restarts, and the entry ends with its time or the session."""

from __future__ import annotations

import os
import pwd
import re
import stat
import time
from collections.abc import Callable

from writerpool.audit import audit_grant, iso_time
from writerpool.config.paths import Paths
from writerpool.egress import grants
from writerpool.egress.allowlist import NOT_LISTED, admitting_entry
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.modes.egress_view import parse_target
from writerpool.pool.provision.listing import unknown_writer, writer_names
from writerpool.report import Report

DEFAULT_FOR = "30m"
MIN_SECONDS = 60
MAX_SECONDS = 24 * 3600
_DURATION = re.compile(r"^([1-9][0-9]{0,4})([smh])$")
_UNIT = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> int:
    """`90s`, `30m`, `2h` into seconds, between a minute and a day; else
    egress_allow_duration_invalid."""
    found = _DURATION.fullmatch(text.strip())
    seconds = int(found.group(1)) * _UNIT[found.group(2)] if found else 0
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        shown = "".join(c for c in text[:40] if c.isprintable())
        raise UsageError(f"--for {shown!r}: give a duration like 90s, 30m or 2h, "
                         "from 1m to 24h", code="egress_allow_duration_invalid")  # fmt: skip
    return seconds


def target_entry(text: str) -> str:
    """The one allowlist entry admitting HOST[:PORT] (or http://HOST[:PORT]); else
    egress_allow_target_invalid (no sets, wildcards or ranges: one destination)."""
    try:
        host, port, scheme = parse_target(text)
    except UsageError as exc:
        raise UsageError(exc.message, code="egress_allow_target_invalid") from exc
    entry = admitting_entry(host, port, scheme, NOT_LISTED)
    if entry is None:
        raise UsageError(f"{host!r} names no single destination an entry could admit",
                         code="egress_allow_target_invalid")  # fmt: skip
    return entry


def live_session(paths: Paths, name: str) -> grants.GrantFile:
    """The writer's session with an allowlist proxy listening now; else
    egress_allow_no_session."""
    if name not in {n for _, n in writer_names(paths)}:
        raise unknown_writer(paths, name)
    found = grants.read(paths.writer_record(name).egress_grants)
    listening = False
    if found is not None:
        try:
            listening = stat.S_ISSOCK(os.lstat(found.socket).st_mode)
        except OSError:
            listening = False
    if found is None or not listening:
        raise WriterpoolError(
            "egress_allow_no_session",
            f"writer {name} has no session with an allowlist proxy now (a workspace with "
            "--allow, in a session): nothing was added",
        )
    return found


def _operator() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid {os.getuid()}"


def allow(
    paths: Paths, name: str, target: str, duration: str = DEFAULT_FOR,
    now: Callable[[], float] = time.time,
) -> Report:  # fmt: skip
    """Add a session-scoped entry admitting `target` to writer `name`'s live allowlist
    proxy for `duration`; every refusal changes nothing."""
    entry = target_entry(target)
    seconds = parse_duration(duration)
    session = live_session(paths, name)
    moment = now()
    grant = grants.Grant(entry=entry, until=moment + seconds, by=_operator())
    grants.add(paths.writer_record(name).egress_grants, session.session, grant, moment)
    audit_grant(paths, session=session.session, writer=name, entry=entry, until=grant.until,
                by=grant.by)  # fmt: skip
    report = Report("egress allow")
    until = iso_time(grant.until)
    report.add("egress_allow_added", "ok", f"writer/{name}",
               f"{entry} is allowed for writer {name}'s session {session.session} until "
               f"{until} (session-scoped, added by {grant.by}); the agent may retry now",
               entry=entry, session=session.session, until=until, by=grant.by,
               scope="session")  # fmt: skip
    return report
