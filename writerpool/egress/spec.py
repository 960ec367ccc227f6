"""What the server tells a session's egress process, and what it answers (no I/O).

The server writes one `WorkerSpec` as a JSON line on the process's stdin; the process
answers with JSON lines on its stdout: `{"ready": {...}}` or `{"failed": {...}}` once,
then one `{"audit": {...}}` per provider request and one `{"connect": {...}}` per
connection through the allowlist proxy. A line `stop` or the end of stdin (the server
is gone) stops it. Every listener's socket is a name inside the one `directory`.

A new kind of listener is one more member of `ListenerSpec` and one entry in
`egress.worker.LISTENERS`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from writerpool.config.caps import Caps
from writerpool.config.providers import API_KINDS, ResolvedProvider

__all__ = ["CapsSpec", "ConnectListenerSpec", "ProviderListenerSpec", "WorkerSpec"]

_SOCKET_NAME = re.compile(r"[a-z][a-z0-9._-]{0,63}")
# One line on the wire: a spec is a few hundred bytes; an audit record less.
MAX_LINE = 64 * 1024


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CapsSpec(_Wire):
    requests: int
    bytes_up: int
    bytes_down: int
    concurrent: int

    @classmethod
    def of(cls, caps: Caps) -> CapsSpec:
        return cls(requests=caps.requests, bytes_up=caps.bytes_up,
                   bytes_down=caps.bytes_down, concurrent=caps.concurrent)  # fmt: skip

    def caps(self) -> Caps:
        return Caps(self.requests, self.bytes_up, self.bytes_down, self.concurrent)


class ProviderListenerSpec(_Wire):
    """The provider proxy: the session's token in, the real key out."""

    kind: Literal["provider"] = "provider"
    socket: str
    token: str
    provider: str
    api: str
    base_url: str
    key_env: str | None
    builtin: bool
    credential: str = Field(repr=False)
    caps: CapsSpec

    @field_validator("socket")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _SOCKET_NAME.fullmatch(value):
            raise ValueError("a socket is a plain name inside the egress directory")
        return value

    def upstream(self) -> ResolvedProvider:
        return ResolvedProvider(self.provider, API_KINDS[self.api], self.base_url,
                                self.key_env, self.builtin)  # fmt: skip


class ConnectListenerSpec(_Wire):
    """The allowlist proxy (`egress.connect`): entries already expanded from sets, the
    names it resolves itself, its caps, and where session-scoped entries are added."""

    kind: Literal["connect"] = "connect"
    socket: str
    entries: tuple[str, ...] = Field(min_length=1, max_length=64)
    resolve: dict[str, tuple[str, ...]] = Field(default={}, max_length=256)
    concurrent: int = Field(ge=1, le=64)
    total: int = Field(ge=1)
    header_bytes: int = Field(ge=1024, le=1048576)
    header_seconds: float = Field(gt=0)
    idle_seconds: float = Field(gt=0)
    # The session-scoped entries' file (`egress.grants`), absolute; None: none are taken.
    grants: str | None = Field(default=None, max_length=4096)

    @field_validator("socket")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not _SOCKET_NAME.fullmatch(value):
            raise ValueError("a socket is a plain name inside the egress directory")
        return value

    @field_validator("grants")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("the session entries file is an absolute path")
        return value


# The union of listener kinds, discriminated by `kind`.
ListenerSpec = Annotated[ProviderListenerSpec | ConnectListenerSpec, Field(discriminator="kind")]


class WorkerSpec(_Wire):
    session: str
    writer: str | None
    directory: str  # absolute; the process works inside it and binds relative names
    listeners: tuple[ListenerSpec, ...] = Field(min_length=1, max_length=4)
