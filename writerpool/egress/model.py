"""What the provider proxy reports: one record per request (no aiohttp here)."""

from __future__ import annotations

from dataclasses import dataclass

from writerpool.config.caps import Caps

__all__ = ["Caps", "EgressRecord", "Outcome"]

# Why a request ended as it did; the audit line's `outcome`.
Outcome = str
OK = "egress_ok"
UNAUTHORIZED = "egress_token_missing"
FORBIDDEN_TOKEN = "egress_token_wrong"  # noqa: S105 - an outcome code, not a secret
FORBIDDEN_ROUTE = "egress_route_refused"
CAP_REQUESTS = "egress_cap_requests"
CAP_CONCURRENT = "egress_cap_concurrent"
CAP_BYTES_UP = "egress_cap_bytes_up"
CAP_BYTES_DOWN = "egress_cap_bytes_down"
UPSTREAM_FAILED = "egress_upstream_failed"
CANCELLED = "egress_cancelled"
FAILED = "egress_request_failed"


@dataclass(frozen=True)
class EgressRecord:
    """One request through a session's proxy. Never a body, header, query or key.

    `path` is the request path relative to the proxy's prefix when it matched an
    allowed route, else a sanitized form of what was asked (see `sanitize_path`).
    `status` is what the client saw (a cut stream keeps its first status; its
    `outcome` says why it was cut).
    """

    session: str
    writer: str | None
    method: str
    path: str
    status: int
    outcome: Outcome
    bytes_up: int
    bytes_down: int
    duration_ms: int
