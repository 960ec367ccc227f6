"""Doctor results as a Report: human lines and the versioned JSON envelope."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from writerpool.doctor.model import CheckResult, exit_code
from writerpool.report import Finding, Report, sanitize

# Remedies name these fixed system locations on purpose: they are the same on every
# host, reveal nothing about the operator, and a remedy without them is not concrete.
# Everything else path-shaped in a remedy is still dropped.
FIXED_PATHS = (
    "~/.config/containers/containers.conf",
    "~/.config/containers/storage.conf",
    "/dev/net/tun",
    "/dev/net",
)
_FIXED = re.compile("(" + "|".join(re.escape(p) for p in FIXED_PATHS) + r")(?![\w./-])")


def sanitize_remedy(text: str) -> str:
    pieces = _FIXED.split(text)
    # re.split with one group alternates: plain text, a fixed path, plain text, …
    return "".join(p if i % 2 else sanitize(p) for i, p in enumerate(pieces))


@dataclass(frozen=True)
class DoctorFinding(Finding):
    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.remedy:
            out["remedy"] = sanitize_remedy(self.remedy)
        return out


def to_report(results: Sequence[CheckResult]) -> Report:
    counts = Counter(r.severity for r in results)
    report = Report("doctor", data={
        "exitCode": exit_code(results),
        "summary": {s: counts.get(s, 0) for s in ("ok", "warning", "error")},
    })  # fmt: skip
    for r in results:
        data = dict(r.data)
        if r.severity == "error" and r.blocking:
            data["blocking"] = True
        report.findings.append(
            DoctorFinding(r.id, r.severity, r.subject, r.message, r.remedy, data)
        )
    return report


def render_text(results: Sequence[CheckResult]) -> str:
    marks = {"ok": "ok  ", "warning": "warn", "error": "FAIL"}
    lines = []
    for r in results:
        lines.append(f"[{marks[r.severity]}] {r.subject}: {sanitize(r.message)} ({r.id})")
        if r.remedy and r.severity != "ok":
            lines.append(f"       fix: {sanitize_remedy(r.remedy)}")
    counts = Counter(r.severity for r in results)
    lines.append(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['ok']} ok")
    return "\n".join(lines)


def render_json(results: Sequence[CheckResult]) -> str:
    return to_report(results).render_json()
