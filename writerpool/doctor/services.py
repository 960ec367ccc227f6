"""Services writerpool depends on beyond the Podman CLI: Podman's API socket (fences and
removals use it) and, on request, the npm registry that `image build` installs pi from."""

from __future__ import annotations

from writerpool.agent.install import NPM_REACH_REMEDY
from writerpool.doctor.model import CheckContext, CheckResult
from writerpool.runtime.podman import API_REMEDY


def podman_api(ctx: CheckContext) -> list[CheckResult]:
    """Whether Podman's API service lists containers (probed only where Podman works)."""
    facts = ctx.facts
    if not facts.api_probed:
        return []  # podman_usable or rootless_user already report why
    if facts.api_error is not None:
        return [
            CheckResult("podman_api", "error", "podman", facts.api_error, API_REMEDY, blocking=True)
        ]
    return [CheckResult("podman_api", "ok", "podman", "Podman's API service lists containers")]


def npm_registry(problem: str | None, ca_set: tuple[str, ...]) -> CheckResult:
    """The result of `npm ping` run with the environment `image build` gives npm."""
    given = ", ".join(ca_set) or "none"
    if problem is None:
        return CheckResult(
            "npm_registry", "ok", "npm", f"npm reaches its registry (CA variables set: {given})"
        )
    return CheckResult(
        "npm_registry",
        "error",
        "npm",
        f"npm cannot reach its registry: {problem} (CA variables set: {given})",
        NPM_REACH_REMEDY,
    )
