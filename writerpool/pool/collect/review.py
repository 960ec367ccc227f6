"""`writer log` and `writer diff`: what an agent did, read before anything is collected.

The clone is read in a throwaway container (clonetool `review`: read-only mount, no
network, none of the clone's git settings); the host never runs git in it. Everything
the agent wrote (names, subjects, paths, the patch) is made safe for a terminal here:
escape sequences and control characters are removed before it is printed or put in JSON.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.config.models import LoadedConfig
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.provision.writer_ref import find_writer
from writerpool.pool.writer.inspect import OID, VIEW, ClonePath, run_tool, tool_spec
from writerpool.pool.writer.lease import Lease, lease_taken
from writerpool.report import Report
from writerpool.runtime.host import WriterHost
from writerpool.state.writer import WriterState
from writerpool.utf8 import valid_text

# CSI and OSC sequences first (so their parameters go too), then any other control.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_LINE_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str, lines: bool = False) -> str:
    """`text` without escape sequences or control characters (tabs and, with `lines`,
    newlines kept); an undecodable byte (a surrogate) shows as `\\xNN` (utf8.py)."""
    text = valid_text(text)
    text = _ESCAPES.sub("", text)
    return (_CONTROLS if lines else _LINE_CONTROLS).sub("", text).replace("\t", "    ")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CommitSeen(_Model):
    commit: str = Field(pattern=OID)
    parents: tuple[str, ...] = Field(max_length=64)
    author: str = Field(max_length=4096)
    email: str = Field(max_length=4096)
    date: str = Field(max_length=64)
    subject: str = Field(max_length=4096)


class FileSeen(_Model):
    path: ClonePath
    binary: bool
    added: int = Field(ge=0)
    removed: int = Field(ge=0)


class ReviewReport(_Model):
    head: str
    head_commit: str | None = Field(default=None, pattern=OID)
    commits: tuple[CommitSeen, ...]
    tip: str = Field(pattern=OID)
    old: str = Field(pattern=OID)
    files: tuple[FileSeen, ...] = Field(max_length=2000)
    files_total: int = Field(default=0, ge=0)  # all changed files; `files` holds the first
    patch: str | None = None
    truncated: bool = False


def _branch(name: str | None) -> str | None:
    if name is None:
        return None
    if not name or name.startswith("-") or len(name) > 255 or not name.isprintable():
        raise UsageError("a branch name is printable, at most 255 characters, not led by '-'")
    return name


def _review(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    state: WriterState,
    request: dict[str, Any],
) -> ReviewReport:
    if state.baseline is None:
        raise WriterpoolError("writer_state_invalid", "the writer was never fully provisioned")
    pool = loaded.config.pool
    caps = {"max_file": pool.collect_max_file_bytes, "max_total": pool.collect_max_total_bytes}
    request = {
        "base": state.base.commit,
        "exclude": sorted({state.base.commit, *state.baseline.branches.values()}),
        "caps": caps,
        **request,
    }
    spec = tool_spec(paths, host, state, pool, VIEW)
    try:
        answer = run_tool(host, spec, "review", request, "writer_inspect_failed")
    except WriterpoolError as exc:
        # A session changing the clone as it was read: say so, not a broken clone.
        if lease_taken(paths.writer_dir(state.name)):
            raise Lease(paths.writer_dir(state.name)).busy() from exc
        raise
    try:
        return ReviewReport.model_validate(answer)
    except ValidationError as exc:
        raise WriterpoolError("writer_inspect_failed", "the review report is invalid") from exc


def _what(branch: str | None, wip: bool) -> str:
    if wip:
        return "uncommitted and untracked work (against HEAD)"
    return f"branch {terminal_safe(branch)}" if branch else "HEAD"


def writer_log(
    paths: Paths, host: WriterHost, loaded: LoadedConfig, name: str, branch: str | None
) -> tuple[Report, str]:
    """`writer log NAME [BRANCH]`: the commits not in the base; (report, text)."""
    ref = find_writer(paths, name)
    seen = _review(paths, host, loaded, ref.load(), {"branch": _branch(branch)})
    commits = [
        {"commit": c.commit, "parents": list(c.parents), "author": terminal_safe(c.author),
         "email": terminal_safe(c.email), "date": terminal_safe(c.date),
         "subject": terminal_safe(c.subject)}
        for c in seen.commits
    ]  # fmt: skip
    report = Report("writer log")
    report.add("writer_log", "ok", ref.target,
               f"{len(commits)} commit(s) on {_what(branch, False)} not in the base")  # fmt: skip
    report.data.update(writer=name, branch=branch, tip=seen.tip, commits=commits)
    lines = [f"{c['commit'][:12]} {c['date'][:10]} {c['author']}: {c['subject']}" for c in commits]
    return report, "\n".join(lines) or f"no commits on {_what(branch, False)} beyond the base"


def _stat_lines(files: list[dict[str, Any]], total: int) -> list[str]:
    width = max((len(f["path"]) for f in files), default=0)
    lines = []
    for f in files:
        change = "binary" if f["binary"] else f"+{f['added']} -{f['removed']}"
        lines.append(f" {f['path'].ljust(min(width, 60))} | {change}")
    added = sum(f["added"] for f in files)
    removed = sum(f["removed"] for f in files)
    if total > len(files):
        lines.append(f" ... and {total - len(files)} more file(s), not listed")
        lines.append(f" {total} file(s) changed; {added} insertion(s), {removed} deletion(s) "
                     f"in the {len(files)} listed")  # fmt: skip
        return lines
    lines.append(f" {len(files)} file(s) changed, {added} insertion(s), {removed} deletion(s)")
    return lines


def writer_diff(
    paths: Paths,
    host: WriterHost,
    loaded: LoadedConfig,
    name: str,
    branch: str | None,
    wip: bool,
    stat: bool,
) -> tuple[Report, str]:
    """`writer diff NAME [BRANCH|--wip] [--stat]`: changes against the base (the branch's
    merge base with it) or, with --wip, the work tree against HEAD; (report, text)."""
    if wip and branch is not None:
        raise UsageError("give a BRANCH or --wip, not both")
    ref = find_writer(paths, name)
    request = {"branch": _branch(branch), "wip": wip, "patch": not stat}
    seen = _review(paths, host, loaded, ref.load(), request)
    files = [{"path": terminal_safe(f.path), "binary": f.binary, "added": f.added,
              "removed": f.removed} for f in seen.files]  # fmt: skip
    total = max(seen.files_total, len(files))
    report = Report("writer diff")
    shown = "" if total == len(files) else f" (the first {len(files)} listed)"
    report.add("writer_diff", "ok", ref.target,
               f"{total} file(s) changed in {_what(branch, wip)}{shown}")  # fmt: skip
    report.data.update(writer=name, branch=branch, wip=wip, old=seen.old, new=seen.tip,
                       files=files, filesTotal=total)  # fmt: skip
    if stat:
        return report, "\n".join(_stat_lines(files, total))
    patch = terminal_safe(seen.patch or "", lines=True)
    report.data.update(patch=patch, truncated=seen.truncated)
    tail = "\n[the diff was cut at its size cap]" if seen.truncated else ""
    return report, (patch.rstrip("\n") or "no changes") + tail
