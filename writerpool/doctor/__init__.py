"""Doctor: what the host lacks for writerpool, and how to fix it (SPEC section 12)."""

from writerpool.doctor.model import CheckContext, CheckResult, exit_code
from writerpool.doctor.registry import BUILTIN_CHECKS, blocking_failures, run_checks
from writerpool.doctor.service import diagnose

__all__ = [
    "BUILTIN_CHECKS",
    "CheckContext",
    "CheckResult",
    "blocking_failures",
    "diagnose",
    "exit_code",
    "run_checks",
]
