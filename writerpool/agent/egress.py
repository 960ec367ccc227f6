"""How a session's agent reaches its provider: the egress policy of its network kind.

- `provider` (limited): a host-side proxy for this session alone listens on a Unix
  socket in the session's egress directory; the agent's settings (its backend renders
  them: seam.py) point the provider at the image's loopback forwarder with a
  per-session token as its key. The real credential stays in this process.
- `none` (limited): nothing can leave, so no credential is handed out at all.
- `slirp4netns`, `pasta`, and host sessions (NOT limited): the provider's key is
  copied into the private agent directory for the session and removed when it ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from writerpool.agent.allow import allowlist_spec
from writerpool.agent.backends import backend_for, remove_credentials
from writerpool.agent.environment import CONNECT_SOCKET
from writerpool.atomic import ensure_private_dir
from writerpool.config.models import Config
from writerpool.config.network import network_info
from writerpool.config.providers import ResolvedProvider, provider_key, resolve_provider
from writerpool.crash import crash_point
from writerpool.egress import grants as session_grants
from writerpool.errors import WriterpoolError
from writerpool.runtime.host import EGRESS_SOCKET

if TYPE_CHECKING:  # types only: the egress process's host side loads when a session needs it
    from writerpool.egress.supervisor import EgressSession, EgressSupervisor


class Grant(Protocol):
    """What a session holds of its egress until it ends."""

    def revoke(self) -> None: ...

    def ready(self) -> None:
        """Return once the session's way out serves (raise egress_failed if it never will)."""
        ...

    def denied(self) -> list[dict[str, str]]: ...

    @property
    def lost(self) -> bool:
        """Whether the session's way to its provider is gone (its proxy process died)."""
        ...


@dataclass(frozen=True)
class EgressRequest:
    config: Config
    provider: str
    network: str  # a network kind, or "host" for a host session
    agent_dir: Path  # rendered for the agent here
    egress_dir: Path  # the proxy's socket goes here (provider only)
    session: str
    writer: str | None
    port: int  # where the forwarder listens inside the container
    allow: tuple[str, ...] | None = None  # the workspace's allowlist words
    # The agent directory was rendered for this provider, without a key, by whoever holds
    # the writer since (a warm writer's pool): nothing else could write to it meanwhile.
    rendered: bool = False
    # Where `writerpool egress allow` adds session-scoped entries (a writer's session with
    # an allowlist only: WriterRecord.egress_grants).
    grants: Path | None = None
    agent: str = "pi"  # the profile's agent, whose backend renders agent_dir


@dataclass
class RenderedDir:
    """The agent directory is all the session holds: with the key on an open network
    or a host session, without any on `none`."""

    agent_dir: Path

    @property
    def lost(self) -> bool:
        return False  # nothing on the host stands between the agent and its provider

    def ready(self) -> None:
        return None

    def revoke(self) -> None:
        remove_credentials(self.agent_dir)

    def denied(self) -> list[dict[str, str]]:
        return []


@dataclass
class Proxied:
    """A provider-mode session: the proxy holds the key; the writer holds a token."""

    agent_dir: Path
    proxy: EgressSession  # the session's egress process (its allowlist proxy too, if any)
    grants: Path | None = None  # its session-scoped entries, which end with it

    @property
    def lost(self) -> bool:
        return not self.proxy.alive

    def ready(self) -> None:
        self.proxy.wait_ready()

    def revoke(self) -> None:
        try:
            self.proxy.stop()
            if self.grants is not None:
                session_grants.close_session(self.grants, self.proxy.session)
        finally:
            remove_credentials(self.agent_dir)

    def denied(self) -> list[dict[str, str]]:
        """Destinations the allowlist proxy refused in this session, and why."""
        return [{"destination": d, "reason": r} for d, r in self.proxy.denied.items()]


def resolve(config: Config, name: str) -> tuple[ResolvedProvider, str]:
    """The provider and its real credential, or the refusal a client sees."""
    resolved = resolve_provider(config, name)
    if resolved is None:
        raise WriterpoolError("provider_unconfigured", f"provider {name!r} is not known")
    key = provider_key(resolved)
    if key is None:
        raise WriterpoolError(
            "provider_unconfigured", f"no credential is available for provider {name!r}"
        )
    return resolved, key


def grant(request: EgressRequest, host: EgressSupervisor | None) -> Grant:
    """Render the agent directory for this session's provider and open its egress."""
    resolved, key = resolve(request.config, request.provider)
    return grant_key(request, host, resolved, key)


def grant_key(
    request: EgressRequest, host: EgressSupervisor | None, resolved: ResolvedProvider, key: str
) -> Grant:
    """The same for a given key: acceptance sends a canary credential this way."""
    container = request.network != "host"
    backend = backend_for(request.agent)
    if not request.rendered:
        # Rendered anew each session: nothing a killed server or an agent left survives.
        remove_credentials(request.agent_dir)
        backend.render(request.config, request.agent_dir, request.provider, container)
    info = network_info(request.network) if container else None
    if info is not None and info.egress:
        if host is None:
            raise WriterpoolError("session_start_failed", "the provider proxy is not running")
        ensure_private_dir(request.egress_dir)
        connect, scoped = None, request.grants if request.allow else None
        if request.allow:
            connect = allowlist_spec(request.config, request.allow, request.egress_dir, scoped)
        if scoped is not None:  # before the proxy reads it: no entry of an earlier session
            socket = request.egress_dir / CONNECT_SOCKET
            session_grants.open_session(scoped, request.session, socket)
        proxy = host.open(
            session=request.session,
            writer=request.writer,
            socket_path=request.egress_dir / EGRESS_SOCKET,
            upstream=resolved,
            credential=key,
            caps=request.config.pool.caps(),
            wait=False,  # its process starts while the agent does: see Grant.ready
            connect=connect,
        )
        crash_point("egress.proxy_started")
        held: Grant = Proxied(request.agent_dir, proxy, scoped)
        try:
            give_key(request, held, resolved, key)
        except BaseException:
            proxy.stop()
            raise
        return held
    held = RenderedDir(request.agent_dir)
    give_key(request, held, resolved, key)
    return held


def give_key(request: EgressRequest, held: Grant, resolved: ResolvedProvider, key: str) -> None:
    """Give request.agent's rendered directory its way to the provider under `held`: the
    proxy's endpoint and token, the key itself where the network gives it (an open kind,
    a host session), nothing on `none`."""
    backend = backend_for(request.agent)
    if isinstance(held, Proxied):
        base_url = held.proxy.base_url(request.port)
        backend.point_at_proxy(request.agent_dir, resolved, base_url, held.proxy.token)
        return
    info = network_info(request.network) if request.network != "host" else None
    if info is not None and info.limited:
        return  # `none`: no key, nothing could use it
    backend.install_credential(request.agent_dir, request.provider, key)


def render_beside(
    request: EgressRequest, held: Grant, resolved: ResolvedProvider, key: str
) -> None:
    """Render request.agent's directory beside the one `held` was granted for, with the
    same way out: acceptance checks every agent of a workspace behind one proxy."""
    container = request.network != "host"
    backend_for(request.agent).render(request.config, request.agent_dir, request.provider,
                                      container)  # fmt: skip
    give_key(request, held, resolved, key)
