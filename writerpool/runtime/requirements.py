"""The requirements `image derive` accepts: names with versions, markers and hashes only.

A requirements file is pip's own small language: option lines (`--no-binary`, `-i`,
`-r`, `-c`, `-e`, `--find-links`), direct references (`name @ URL`), paths and
archives. Each of those can make pip build a package (run its `setup.py` or build
backend) on the host, or fetch from somewhere else than the operator's index. So every
line is parsed here, with the `packaging` library's requirement parser, before pip
starts; anything but `name[extras] <specifiers>; <markers>` with `--hash=ALGO:HEX`
options is refused, naming each offending line. pip is then given the re-rendered
lines, never the operator's file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import BaseModel, ConfigDict

from writerpool.errors import UsageError

# pip's comment rule: a `#` at the start or after whitespace starts a comment.
_COMMENT = re.compile(r"(^|\s+)#.*$")
# The digests pip's --hash takes, with the length of their hexadecimal form.
HASH_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
_HASH = re.compile(r"^(sha256|sha384|sha512):([0-9a-fA-F]+)$")
# In a rendered line pip would still expand `${VAR}`, end the line at ` #` and join a
# line ending in `\`: such a line would not mean what was checked.
_REREAD = re.compile(r"[#$\\]|[^\x21-\x7e ]")
# pip reads a name ending like an archive or a wheel as a file to build or install.
_FILE_LIKE = re.compile(r"\.(whl|zip|tar|tgz|tbz|txz|tlz|gz|bz2|xz|lz|lzma)$", re.IGNORECASE)
_USERINFO = re.compile(r"(://)[^/\s@]*@")
MAX_REQUIREMENTS = 2000
SHOWN_REFUSALS = 5
SHOWN_CHARS = 80
ACCEPTED = "`name[extras] <versions>; <markers>` with --hash=ALGO:HEX options"


class RequirementsRefused(UsageError):
    """Lines of a requirements file that `image derive` does not hand to pip."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="image_requirement_refused")


class Requirements(BaseModel):
    """The accepted requirements, each re-rendered on one line (what pip is given)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lines: tuple[str, ...]

    def render(self) -> str:
        return "".join(f"{line}\n" for line in self.lines)


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each line pip would read: continuations joined,
    comments and blank lines dropped."""
    start, parts = 0, list[str]()
    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.endswith("\\") and not _COMMENT.match(raw):
            start = start or number
            parts.append(raw[:-1])
            continue
        # A comment line ends a continuation, as in pip; the space keeps it a comment.
        parts.append(" " + raw if _COMMENT.match(raw) else raw)
        first, joined = start or number, "".join(parts)
        start, parts = 0, []
        line = _COMMENT.sub("", joined).strip()
        if line:
            yield first, line
    line = _COMMENT.sub("", "".join(parts)).strip()
    if line:
        yield start, line


def _hashes(options: list[str]) -> list[str]:
    """The --hash options after a requirement, as `--hash=ALGO:hex`; ValueError otherwise."""
    out: list[str] = []
    words = iter(options)
    for word in words:
        if word == "--hash":
            value = next(words, "")
        elif word.startswith("--hash="):
            value = word.removeprefix("--hash=")
        else:
            raise ValueError(f"the option {word.split('=')[0]} (only --hash may follow a name)")
        found = _HASH.match(value)
        if found is None or len(found.group(2)) != HASH_LENGTHS[found.group(1)]:
            raise ValueError("a --hash that is not sha256, sha384 or sha512:HEX of its length")
        out.append(f"--hash={found.group(1)}:{found.group(2).lower()}")
    return out


def render_line(line: str) -> str:
    """One logical line as pip will be given it; ValueError says why it is refused."""
    words = line.split()
    if words[0].startswith("-"):
        raise ValueError(f"an option line ({words[0].split('=')[0]})")
    split = next((i for i, w in enumerate(words) if w.startswith("-")), len(words))
    try:
        requirement = Requirement(" ".join(words[:split]))
    except InvalidRequirement as exc:
        raise ValueError("not a requirement (a path, URL, archive or editable?)") from exc
    if requirement.url is not None:
        raise ValueError("a direct reference (name @ URL)")
    if _FILE_LIKE.search(requirement.name):
        raise ValueError("a file name (pip would read it as an archive or a wheel)")
    rendered = " ".join([str(requirement), *_hashes(words[split:])])
    if _REREAD.search(rendered):
        raise ValueError("a character pip would read otherwise ($, #, \\ or a non-ASCII one)")
    return rendered


def shown(text: str) -> str:
    """A refused line for a message: printable, short, without a URL's user and password."""
    text = _USERINFO.sub(r"\1", text)
    text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def parse_requirements(text: str) -> Requirements:
    """Every requirement of the file, or RequirementsRefused naming each refused line."""
    accepted: list[str] = []
    refused: list[str] = []
    for number, line in logical_lines(text.removeprefix("\ufeff")):
        try:
            accepted.append(render_line(line))
        except ValueError as why:
            refused.append(f"line {number} `{shown(line)}`: {why}")
    if refused:
        more = len(refused) - SHOWN_REFUSALS
        listed = "; ".join(refused[:SHOWN_REFUSALS]) + (f"; and {more} more" if more > 0 else "")
        raise RequirementsRefused(
            f"the requirements file has {len(refused)} refused line(s), before pip ran: "
            f"{listed}. Accepted: {ACCEPTED}; pip's own configuration (pip.conf, PIP_INDEX_URL) "
            "says where wheels come from"
        )
    if not accepted:
        raise RequirementsRefused("the requirements file names no requirement")
    if len(accepted) > MAX_REQUIREMENTS:
        raise RequirementsRefused(
            f"the requirements file names {len(accepted)} requirements (at most {MAX_REQUIREMENTS})"
        )
    return Requirements(lines=tuple(accepted))
