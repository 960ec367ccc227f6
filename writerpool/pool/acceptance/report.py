"""The acceptance harness's report, typed: the harness's stdout is untrusted input.

Inside a writer the agent's code runs beside the harness, so whatever reaches stdout
is validated here at once, with a size and nesting bound; nothing else reads it raw.
Any check name is accepted (the harness grows checks), each with a known status.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.untrusted import DocumentRefused, loads_json

MAX_REPORT_BYTES = 256 * 1024
MAX_CHECKS = 256

CheckStatus = Literal["pass", "fail", "inconclusive"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class HarnessCheck(_Strict):
    status: CheckStatus
    detail: str = ""


class HarnessReport(_Strict):
    schema_version: int = Field(default=1, alias="schemaVersion")
    verdict: Literal["pass", "fail"]
    network: str | None = Field(default=None, max_length=64)
    checks: dict[str, HarnessCheck] = Field(max_length=MAX_CHECKS)
    # The probes that decide `network`; reported apart from the verdict.
    network_checks: dict[str, HarnessCheck] = Field(
        default={}, alias="networkChecks", max_length=MAX_CHECKS
    )

    def with_status(self, status: CheckStatus) -> list[str]:
        return sorted(name for name, check in self.checks.items() if check.status == status)

    def status_of(self, name: str) -> CheckStatus | None:
        check = self.checks.get(name) or self.network_checks.get(name)
        return check.status if check is not None else None

    def network_not_passed(self) -> list[str]:
        return sorted(n for n, check in self.network_checks.items() if check.status != "pass")


def parse_harness_report(stdout: bytes) -> HarnessReport | None:
    """The report, or None when stdout holds no valid one (too big, too deep, malformed)."""
    if len(stdout) > MAX_REPORT_BYTES:
        return None
    try:
        return HarnessReport.model_validate(loads_json(stdout, max_depth=8))
    except (ValueError, ValidationError, DocumentRefused):
        return None
