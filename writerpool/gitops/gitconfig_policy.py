"""Which git configuration keys a writer's clone may hold.

Two layers. A deny table names every key git-config(1) documents as running a
program, reading another file or redirecting the repository, with a short reason.
Behind it, an allow-list of sections: a key in any other section is refused too,
so a key git adds in a later release is refused until someone has looked at it.
Section and key names match case-insensitively, as git does; subsection names are
shown as `*` because an agent could have chosen them.
"""

from __future__ import annotations

import inspect
import io
import os
from collections.abc import Iterator
from typing import IO

from dulwich.config import ConfigFile

from writerpool.gitops.base import copyable_origin

RUNS = "runs a command"
READS = "reads another file"
REDIRECTS = "redirects the repository"

# Sections refused whole: every key in them runs, reads or redirects something.
_DENIED_SECTIONS: dict[str, str] = {
    "include": "includes another file",
    "includeif": "includes another file",
    "filter": "runs a filter command",
    "alias": "defines a command alias",
    "credential": "runs a credential helper",
    "pager": RUNS,
    "sequence": RUNS,
    "gpg": "runs a signing program",
    "difftool": RUNS,
    "mergetool": RUNS,
    "http": "sets transport proxies or files",
    "url": "rewrites remote URLs",
    "submodule": "configures submodule commands",
    "protocol": "allows transports",
    "ssh": "selects the ssh program",
    "uploadpack": RUNS,
    "uploadarchive": RUNS,
    "receive": "configures receiving pushes",
    "fsck": READS,
    "trace2": "writes traces elsewhere",
    "safe": "overrides ownership checks",
    "mailmap": READS,
    "sendemail": RUNS,
    "browser": RUNS,
    "web": RUNS,
    "man": RUNS,
    "help": RUNS,
    "instaweb": RUNS,
    "gui": RUNS,
    "guitool": RUNS,
    "maintenance": "schedules background commands",
    "lfs": "configures an external program",
}

# Sections whose other keys are harmless (formatting, identity, tracking, limits).
_ALLOWED_SECTIONS = frozenset(
    {
        "core",
        "remote",
        "branch",
        "user",
        "extensions",
        "init",
        "advice",
        "color",
        "column",
        "i18n",
        "gc",
        "fetch",
        "pull",
        "push",
        "status",
        "log",
        "pack",
        "index",
        "feature",
        "rerere",
        "merge",
        "diff",
        "commit",
        "tag",
        "rebase",
        "apply",
        "grep",
        "am",
        "transfer",
        "checkout",
        "clone",
    }
)

# (section, has a subsection, key) -> reason.
_DENIED_KEYS: dict[tuple[str, bool | None, str], str] = {
    ("core", False, "hookspath"): "redirects hooks",
    ("core", False, "fsmonitor"): RUNS,
    ("core", False, "sshcommand"): RUNS,
    ("core", False, "pager"): RUNS,
    ("core", False, "editor"): RUNS,
    ("core", False, "askpass"): RUNS,
    ("core", False, "gitproxy"): RUNS,
    ("core", False, "alternaterefscommand"): RUNS,
    ("core", False, "worktree"): REDIRECTS,
    ("core", False, "attributesfile"): READS,
    ("core", False, "excludesfile"): READS,
    ("diff", False, "external"): RUNS,
    ("diff", False, "tool"): RUNS,
    ("diff", False, "guitool"): RUNS,
    ("diff", False, "orderfile"): READS,
    ("diff", True, "textconv"): RUNS,
    ("diff", True, "command"): RUNS,
    ("merge", False, "tool"): RUNS,
    ("merge", False, "guitool"): RUNS,
    ("merge", True, "driver"): RUNS,
    ("commit", False, "gpgsign"): "runs a signing program",
    ("commit", False, "template"): READS,
    ("tag", False, "gpgsign"): "runs a signing program",
    ("tag", False, "forcesignannotated"): "runs a signing program",
    ("push", False, "gpgsign"): "runs a signing program",
    ("user", False, "signingkey"): "selects a signing key",
    ("log", False, "showsignature"): "runs a signing program",
    ("pull", False, "twohead"): "selects a merge program",
    ("pull", False, "octopus"): "selects a merge program",
    ("init", False, "templatedir"): READS,
    ("remote", True, "uploadpack"): RUNS,
    ("remote", True, "receivepack"): RUNS,
    ("remote", True, "proxy"): "sets a proxy",
    ("remote", True, "vcs"): "runs a remote helper",
    ("remote", True, "promisor"): "fetches objects lazily",
    ("remote", True, "partialclonefilter"): "fetches objects lazily",
    ("fetch", False, "bundleuri"): "downloads from another location",
}

# Sections where a subsection means something other than intended (or nothing).
_NO_SUBSECTION = frozenset(
    {
        "core",
        "user",
        "extensions",
        "init",
        "commit",
        "tag",
        "pull",
        "push",
        "fetch",
        "transfer",
        "pack",
        "index",
        "feature",
    }
)
_ALLOWED_EXTENSIONS = frozenset({"objectformat"})


def parse_config(data: bytes) -> ConfigFile:
    """Parse config bytes with dulwich, never following include directives.

    dulwich releases that expand includes take `expand_includes`; older ones that
    know `file_opener` get one that refuses; the oldest read no includes at all.
    """
    params = inspect.signature(ConfigFile.from_file).parameters
    if "expand_includes" in params:
        return ConfigFile.from_file(
            io.BytesIO(data), expand_includes=False, file_opener=_refuse_open
        )
    if "file_opener" in params:
        return ConfigFile.from_file(io.BytesIO(data), file_opener=_refuse_open)
    return ConfigFile.from_file(io.BytesIO(data))


def _refuse_open(path: str | os.PathLike[str]) -> IO[bytes]:
    raise PermissionError("included files are never read")


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw


def config_entries(config: ConfigFile) -> Iterator[tuple[str, str | None, str, bytes]]:
    """(section lowercased, subsection or None, key lowercased, value) for every value."""
    for section in config.sections():
        name = _text(section[0]).lower()
        sub = _text(section[1]) if len(section) > 1 else None
        for key, value in config.items(section):
            raw = value if isinstance(value, bytes) else str(value).encode()
            yield name, sub, _text(key).lower(), raw


def url_problem(value: bytes) -> str | None:
    """Why a remote URL in a writer's clone is refused, or None."""
    url = value.decode("utf-8", "replace")
    return None if copyable_origin(url) else "names a transport helper, userinfo or odd syntax"


def _section_problem(section: str, sub: str | None) -> str | None:
    reason = _DENIED_SECTIONS.get(section)
    if reason is not None:
        return reason
    if section not in _ALLOWED_SECTIONS:
        return "section not allowed in a writer's clone"
    if sub is not None and section in _NO_SUBSECTION:
        return "unexpected subsection"
    return None


def entry_problem(section: str, sub: str | None, key: str, value: bytes) -> str | None:
    """The reason one configuration value is refused, or None when it is allowed."""
    reason = _section_problem(section, sub) or _DENIED_KEYS.get((section, sub is not None, key))
    if reason is not None:
        return reason
    if section == "extensions" and key not in _ALLOWED_EXTENSIONS:
        return "repository extension not allowed"
    if section == "remote" and sub is not None and key in {"url", "pushurl"}:
        return url_problem(value)
    return None


def label(section: str, sub: str | None, key: str) -> str:
    """A key's name for a message: subsection hidden, long names cut."""
    text = f"{section}.{key}" if sub is None else f"{section}.*.{key}"
    return text if len(text) <= 60 else text[:57] + "..."


def config_problems(data: bytes) -> list[str]:
    """Problems with a writer clone's `.git/config` bytes; empty when it is safe."""
    # git writes no continuation lines; refusing them keeps dulwich and git agreeing
    # on where each key starts.
    if any(line.rstrip(b"\r").endswith(b"\\") for line in data.split(b"\n")):
        return ["config: line continuations are not allowed"]
    try:
        config = parse_config(data)
    except Exception:  # any parser failure: not trusted
        return ["config: cannot be parsed"]
    problems: list[str] = []
    for section, sub, key, value in config_entries(config):
        reason = entry_problem(section, sub, key, value)
        if reason is not None:
            text = f"{label(section, sub, key)}: {reason}"
            if text not in problems:
                problems.append(text)
    return problems
