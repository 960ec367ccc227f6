"""A check's result, the context every check reads, and doctor's exit code."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from writerpool.config.models import LoadedConfig
from writerpool.config.modes import ExecutionModes
from writerpool.config.paths import Paths
from writerpool.errors import CODES, WriterpoolError
from writerpool.runtime.info import HostFacts

Severity = Literal["ok", "warning", "error"]

# Exit codes of `writerpool doctor` (its own mapping, documented in docs/doctor.md).
EXIT_OK, EXIT_WARNINGS, EXIT_ERRORS = 0, 1, 2


@dataclass(frozen=True)
class CheckResult:
    """One finding of one check. `id` is the stable check id and the finding's code;
    `subject` names what was checked (host, podman, workspace/<alias>, …), never a path.
    `blocking` marks an error that stops container provisioning (see blocking_failures)."""

    id: str
    severity: Severity
    subject: str
    message: str
    remedy: str = ""
    blocking: bool = False
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.id not in CODES:
            raise ValueError(f"unregistered check id {self.id!r}")
        if self.severity != "ok" and not self.remedy:
            raise ValueError(f"check {self.id} reports a problem without a remedy")


@dataclass(frozen=True)
class ImagePin:
    image_id: str


@dataclass(frozen=True)
class CheckContext:
    """Everything a check may read. Configuration, modes and the image pin are loaded
    once; a load failure is kept as the error so its own check can report it."""

    paths: Paths
    facts: HostFacts
    loaded: LoadedConfig | None = None
    config_error: WriterpoolError | None = None
    modes: ExecutionModes | None = None
    modes_error: WriterpoolError | None = None
    pin: ImagePin | None = None
    pin_error: str | None = None


Check = Callable[[CheckContext], Sequence[CheckResult]]


def exit_code(results: Sequence[CheckResult]) -> int:
    severities = {r.severity for r in results}
    if "error" in severities:
        return EXIT_ERRORS
    if "warning" in severities:
        return EXIT_WARNINGS
    return EXIT_OK
