"""`writerpool register TARGET --verify`: the registration is exactly what writerpool
writes, and it completes an MCP handshake the way the client would make it.

The transport comes from the ownership record (a registration writerpool did not
record: from what the client shows). stdio: the registered command line is started.
HTTP: the registered header helper is run as the client runs it, and its header is
sent to the registered URL, so a stopped service, a moved port or a revoked token
shows here as it would in the client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from writerpool.clients.adapters import ClientAdapter, Observed
from writerpool.clients.model import SERVER_NAME, Registration, Target
from writerpool.clients.ownership import load_record
from writerpool.clients.service import Ctx, context, divergent, http_wanted, unchanged
from writerpool.config.paths import Paths
from writerpool.report import Report, sanitize


class HandshakeOutcome(Protocol):
    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def tools(self) -> tuple[str, ...]: ...


# (command line, environment, deadline) -> outcome; writerpool.mcp.handshake provides it.
Handshake = Callable[[Sequence[str], dict[str, str], float], HandshakeOutcome]
# (URL, header helper's shell command line, deadline) -> outcome; likewise.
HttpHandshake = Callable[[str, str, float], HandshakeOutcome]
ServerEnv = Callable[[dict[str, str]], dict[str, str]]


@dataclass(frozen=True)
class Checks:
    """The handshakes --verify runs, injected (they load the MCP SDK)."""

    stdio: Handshake
    server_env: ServerEnv
    http: HttpHandshake


def _wanted(paths: Paths, target: Target, observed: Observed | None) -> Registration | None:
    """The HTTP registration when the record (else the client) says it is one."""
    owned = load_record(paths).find(target)
    recorded_http = owned is not None and owned.url is not None
    shown_http = owned is None and observed is not None and observed.kind == "http"
    return http_wanted(paths, target) if recorded_http or shown_http else None


def verify(
    paths: Paths, target: Target, checks: Checks, timeout: float,
    adapter: ClientAdapter | None = None,
) -> Report:  # fmt: skip
    """The registration matches exactly, and completes an MCP handshake."""
    ctx = context(paths, target, adapter, f"register {target.name} --verify")
    ctx.adapter.cli.require()
    observed = ctx.read()
    if observed is None:
        ctx.report.add(
            "registration_absent", "error", ctx.where,
            f"{ctx.label} has no {SERVER_NAME} registration",
            remedy=f"writerpool register {target.name} --apply",
        )  # fmt: skip
        return ctx.report
    wanted = _wanted(paths, target, observed)
    if wanted is not None:
        ctx = context(paths, target, ctx.adapter, "", wanted, ctx.report)
    if not ctx.matches(observed, ctx.wanted) or observed.registration is None:
        divergent(ctx, observed, "error")
        return ctx.report
    problems = ctx.problems(observed)
    if problems:
        ctx.report.add(
            "registration_divergent", "error", ctx.where,
            f"{ctx.label} would not use {SERVER_NAME} as needed: " + "; ".join(problems),
            remedy=f"writerpool register {target.name} --apply",
        )  # fmt: skip
        return ctx.report
    unchanged(ctx, load_record(paths).find(target))
    outcome = _handshake(ctx, observed, checks, timeout)
    ctx.report.add(
        outcome.code,
        "ok" if outcome.code == "mcp_verified" else "error",
        ctx.where,
        outcome.message,
        tools=list(outcome.tools),
    )
    return ctx.report


@dataclass(frozen=True)
class _Outcome:
    code: str
    message: str
    tools: tuple[str, ...] = ()


def _handshake(ctx: Ctx, observed: Observed, checks: Checks, timeout: float) -> HandshakeOutcome:
    registered = observed.registration
    assert registered is not None  # matched above
    if observed.failed is not None:
        # Claude Code's own check of the entry as it stores it (helper included) failed.
        return _Outcome("mcp_failed", f"{ctx.adapter.cli.label}'s own check failed: "
                        + sanitize(observed.failed)[:300])  # fmt: skip
    if registered.kind == "http" and registered.url is not None:
        # Codex shows its helper (read from its file); Claude Code's `mcp get` does not,
        # and the one writerpool recorded is run instead (its health check ran the other).
        helper = registered.settings.get("http_headers_helper") or ctx.wanted.helper
        return checks.http(registered.url, str(helper), timeout)
    # The registered command line, as the client would start it.
    return checks.stdio(registered.argv(), checks.server_env(dict(registered.env)), timeout)
