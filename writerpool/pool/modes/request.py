"""What `writerpool mode set` is asked (ModeRequest), and the checks that refuse a
request before anything is stored."""

from __future__ import annotations

from dataclasses import dataclass

from writerpool.agent.backends import warm_backend_for
from writerpool.config.hosts import known_host
from writerpool.config.models import Config
from writerpool.config.network import DEFAULT_NETWORK
from writerpool.config.providers import resolve_provider
from writerpool.egress.allowlist import expand
from writerpool.egress.derived import DerivedSet, known_sets
from writerpool.errors import UsageError, WriterpoolError
from writerpool.report import Report


@dataclass(frozen=True)
class ModeRequest:
    alias: str
    mode: str | None
    accept_host_writes: bool = False
    profiles: tuple[str, ...] = ()
    writers: int = 1
    lifecycle: str = "persistent"
    image: str = "default"
    network: str = DEFAULT_NETWORK
    tags: str = "none"
    cache: str = "none"
    base: str | None = None
    allow: tuple[str, ...] = ()
    warm: int = 0
    warm_hosts: tuple[tuple[str, int], ...] | None = None  # --warm HOST=N,…
    hosts: tuple[str, ...] = ()
    discard: bool = False
    apply: bool = False
    container_options_given: bool = False


def check_warm(config: Config, names: tuple[str, ...], warm: int) -> None:
    """Warm writers start the first coding profile's agent whose backend can warm."""
    agents = [config.profiles[n].agent for n in names if n in config.profiles]
    if warm and not any(warm_backend_for(agent) is not None for agent in agents):
        raise WriterpoolError(
            "warm_agent_unsupported",
            f"--warm: the agents of these profiles ({', '.join(sorted(set(agents)))}) "
            "start cold for each session; keep --warm 0",
        )


def check_profiles(config: Config, names: tuple[str, ...]) -> None:
    if not names:
        raise WriterpoolError("container_profiles_required", "give --profiles with coding profiles")
    for name in names:
        profile = config.profiles.get(name)
        if profile is None:
            raise WriterpoolError(
                "container_profile_unsupported", f"profile {name!r} is not configured"
            )
        if profile.permission != "coding" or profile.default:
            raise WriterpoolError(
                "container_profile_unsupported",
                f"profile {name!r} must be a non-default coding profile",
            )
        if resolve_provider(config, profile.provider) is None:
            raise WriterpoolError(
                "container_profile_unsupported", f"profile {name!r} names an unknown provider"
            )


def check_allow(config: Config, req: ModeRequest) -> list[DerivedSet]:
    """Every --allow word is a valid entry or a known, non-empty set (nothing stored else);
    returns the derived sets it names, with where their hosts came from."""
    if req.network != "provider":
        raise WriterpoolError(
            "allow_network_unsupported",
            f"--allow needs --network provider (the allowlist proxy sits beside the "
            f"provider proxy), not {req.network}",
        )
    sets = known_sets(config)
    expand(req.allow, sets, sets.why_empty)
    return list(sets.derived.values())


def report_derived(report: Report, alias: str, derived: list[DerivedSet]) -> None:
    for found in derived:
        report.add("allow_set_derived", "ok", f"modes/workspace/{alias}/{found.name}",
                   f"{found.name} names {', '.join(found.hosts)} now, from {found.source}; "
                   "it is derived again when each session starts",
                   hosts=list(found.hosts), source=found.source)  # fmt: skip


def check_hosts(config: Config, hosts: tuple[str, ...]) -> None:
    """Every --hosts name is `local` or a configured [hosts.NAME] (nothing stored else)."""
    for name in hosts:
        if not known_host(name, config.hosts):
            raise UsageError(f"--hosts: no [hosts.{name}] in the configuration",
                             code="host_unknown")  # fmt: skip
