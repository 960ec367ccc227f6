"""Where a session runs: the decision table of execution modes, with no side effects."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from writerpool.config.models import HOST_AGENTS, Config, Profile
from writerpool.config.modes import ExecutionModes, ModeEntry, Placement, placements
from writerpool.errors import WriterpoolError


@dataclass(frozen=True)
class SessionPlan:
    workspace: str
    workspace_dir: Path
    profile_name: str
    profile: Profile
    placement: Placement
    read_only: bool
    base: str | None
    image: str = "default"  # the image a contained session runs: "default" or a 64-hex id


def mode_name(entry: ModeEntry | None) -> str:
    return entry.mode if entry is not None else "unset"


def _profile(config: Config, name: str | None) -> tuple[str, Profile]:
    if name is None:
        if not config.profiles:
            raise WriterpoolError("profile_unknown", "no execution profile is configured")
        name = config.default_profile()
    profile = config.profiles.get(name)
    if profile is None:
        raise WriterpoolError("profile_unknown", f"execution profile {name!r} is not configured")
    return name, profile


def _coding_placement(alias: str, profile_name: str, entry: ModeEntry | None) -> Placement:
    """A coding profile follows the workspace's mode (SPEC section 4)."""
    if entry is None or entry.mode == "host":
        # Unset keeps host coding for compatibility; host mode was acknowledged.
        return "host"
    if entry.mode == "read-only":
        raise WriterpoolError("coding_refused", f"workspace {alias!r} is read-only")
    assert entry.container is not None  # ModeEntry guarantees settings in container mode
    if profile_name not in entry.container.profiles:
        raise WriterpoolError(
            "coding_refused",
            f"profile {profile_name!r} is not enabled for workspace {alias!r}'s writers",
        )
    return "container"


def plan_session(
    config: Config,
    modes: ExecutionModes,
    workspace: str,
    profile_name: str | None,
    base: str | None,
) -> SessionPlan:
    """Decide placement and tools, or raise the stable refusal code."""
    workspace_dir = config.workspaces.get(workspace)
    if workspace_dir is None:
        raise WriterpoolError("workspace_unknown", f"workspace {workspace!r} is not configured")
    name, profile = _profile(config, profile_name)
    read_only = profile.permission == "read-only"
    entry = modes.workspaces.get(workspace)
    # Every read-only session is contained, whatever the mode: it reads, and what it
    # reads goes to the provider (docs/execution-modes.md, "Where sessions run").
    placement: Placement = (
        "readonly_container" if read_only else _coding_placement(workspace, name, entry)
    )
    if placement == "host" and profile.agent not in HOST_AGENTS:
        raise WriterpoolError(
            "agent_host_refused",
            f"profile {name!r} runs {profile.agent}, which runs only in a writer "
            f"(workspace {workspace!r} is in host mode)",
        )
    if base is not None and placement != "container":
        raise WriterpoolError(
            "base_not_applicable",
            "base applies only to coding sessions in container workspaces",
        )
    image = entry.container.image if entry is not None and entry.container is not None else None
    return SessionPlan(
        workspace, workspace_dir, name, profile, placement, read_only, base, image or "default"
    )


def workspace_capabilities(config: Config, modes: ExecutionModes) -> list[dict[str, Any]]:
    """Each workspace's alias and mode; writers and default base for container mode."""
    out: list[dict[str, Any]] = []
    for alias in sorted(config.workspaces):
        entry = modes.workspaces.get(alias)
        item: dict[str, Any] = {
            "alias": alias,
            "mode": mode_name(entry),
            "placement": placements(entry),
        }
        if entry is not None and entry.container is not None:
            item["writers"] = entry.container.writers
            item["warm"] = entry.container.warm  # kept warm by the pool service, when it runs
            item["warmHosts"] = entry.container.warm_by_host()
            item["defaultBase"] = entry.container.base
            item["containerProfiles"] = list(entry.container.profiles)
        out.append(item)
    return out


def profile_capabilities(config: Config) -> list[dict[str, Any]]:
    return [
        {"alias": name, "permission": p.permission, "agent": p.agent, "default": p.default}
        for name, p in sorted(config.profiles.items())
    ]
