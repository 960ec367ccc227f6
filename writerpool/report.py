"""Findings and reports, rendered for people and as a versioned JSON envelope."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from writerpool.errors import CODES
from writerpool.utf8 import valid_text

REPORT_SCHEMA_VERSION = 1

Step = Callable[[str], None]  # progress lines for a terminal; the report is the result


def quiet(_line: str) -> None:
    return None


Status = Literal["ok", "planned", "warning", "error"]

# Anything that looks like an absolute path, a home-relative path or a credential
# is replaced before a message leaves writerpool.
_PATH = re.compile(r"(?<![\w:/])(?:~|/)(?:[\w.@+-]+/)*[\w.@+-]*")
_SECRET = re.compile(
    r"(?i)(?:sk-[a-z0-9_-]{8,}|gh[pousr]_[a-z0-9]{16,}|xox[abpr]-[a-z0-9-]{8,}"
    r"|(?:api[_-]?key|token|secret|password)\s*[=:]\s*\S+|[a-z][a-z0-9+.-]*://[^/\s@]+@\S+)"
)


# Terminal controls (escape sequences, carriage return, bidirectional overrides) in text
# from a writer or another host would rewrite the operator's terminal: shown escaped.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    return ascii(match.group(0))[1:-1]


def sanitize(text: str) -> str:
    """Drop paths and credential-shaped strings from a message; escape terminal controls
    and lone surrogates (utf8.py)."""
    text = _CONTROL.sub(_escaped, valid_text(text))
    text = _SECRET.sub("<redacted>", text)
    return _PATH.sub(lambda m: m.group(0) if m.group(0) == "/" else "<path>", text)


@dataclass(frozen=True)
class Finding:
    code: str
    status: Status
    target: str
    message: str
    remedy: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unregistered code {self.code!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "status": self.status,
            "target": self.target,
            "message": sanitize(self.message),
        }
        if self.remedy:
            out["remedy"] = sanitize(self.remedy)
        if self.data:
            out["data"] = self.data
        return out


@dataclass
class Report:
    command: str
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def add(
        self,
        code: str,
        status: Status,
        target: str,
        message: str,
        remedy: str = "",
        **data: Any,
    ) -> Finding:
        finding = Finding(code, status, target, message, remedy, dict(data))
        self.findings.append(finding)
        return finding

    def has_error(self) -> bool:
        return any(f.status == "error" for f in self.findings)

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def exit_code(self) -> int:
        return 1 if self.has_error() else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": REPORT_SCHEMA_VERSION,
            "command": self.command,
            "ok": not self.has_error(),
            "findings": [f.to_json() for f in self.findings],
            "data": self.data,
        }

    def render_json(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def render_text(self) -> str:
        marks = {"ok": "ok  ", "planned": "plan", "warning": "warn", "error": "FAIL"}
        lines = []
        for f in self.findings:
            lines.append(f"[{marks[f.status]}] {f.target}: {sanitize(f.message)} ({f.code})")
            if f.remedy and f.status in ("warning", "error"):
                lines.append(f"       fix: {sanitize(f.remedy)}")
        return "\n".join(lines)
