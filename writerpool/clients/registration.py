"""The one server registration writerpool writes: its command line, the configuration
location, and for Codex the entry's settings (clients/codex_config.py) with the
variables the server reads from its environment."""

from __future__ import annotations

from writerpool.clients.codex_config import wanted_settings
from writerpool.clients.model import Client, Registration, server_command
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.config.providers import resolve_provider
from writerpool.errors import WriterpoolError
from writerpool.proc import CA_VARIABLES, GIT_CA_VARIABLE

# Names a client that passes its server only a few variables (Codex) must pass on too:
# trust anchors a host behind an intercepting proxy needs, where rootless Podman keeps
# its runtime files, writerpool's XDG locations, and pi's auth store when it was moved.
# None is a secret; the provider key variables come from the configuration.
PASSED_VARS = (
    *CA_VARIABLES, GIT_CA_VARIABLE, "REQUESTS_CA_BUNDLE", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME",
    "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "PI_CODING_AGENT_DIR",
)  # fmt: skip


def server_env_vars(paths: Paths) -> list[str]:
    """Names (never values) of the variables the server reads from its environment: the
    provider key variables of the configured profiles, and PASSED_VARS."""
    names = set(PASSED_VARS)
    try:
        config = load_config(paths).config
    except WriterpoolError:
        return sorted(names)  # verify reports the configuration itself
    for profile in config.profiles.values():
        resolved = resolve_provider(config, profile.provider)
        if resolved is not None and resolved.key_env:
            names.add(resolved.key_env)
    return sorted(names)


def desired_registration(
    paths: Paths, client: Client = "claude-code", approve_prompts: bool = False
) -> Registration:
    """What writerpool registers: its own server, with the configuration location given
    explicitly so the client's working directory and environment never choose it."""
    command, *args = server_command()
    env = {"WRITERPOOL_CONFIG": str(paths.config_file)}
    if client != "codex":
        return Registration(command, tuple(args), env)
    settings = wanted_settings(server_env_vars(paths), approve_prompts)
    return Registration(command, tuple(args), env, settings)
