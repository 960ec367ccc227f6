"""The blocking doctor checks that stop a writer operation, as findings."""

from __future__ import annotations

from collections.abc import Collection

from writerpool.config.paths import Paths
from writerpool.doctor import blocking_failures, diagnose
from writerpool.report import Report


def doctor_gate(
    paths: Paths,
    report: Report,
    target: str,
    *,
    workspace: str,
    profiles: Collection[str],
    network: str | None,
) -> bool:
    """Add one doctor_failed finding per blocking failure; True when none failed."""
    failures = blocking_failures(
        diagnose(paths, reuse=True), workspace=workspace, profiles=profiles, network=network
    )
    for failure in failures:
        report.add(
            "doctor_failed",
            "error",
            target,
            f"{failure.id}: {failure.message}",
            remedy=failure.remedy,
            check=failure.id,
        )
    return not failures
