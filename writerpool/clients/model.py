"""Registration targets, and the one server registration writerpool writes."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from writerpool.config.paths import Paths
from writerpool.errors import UsageError
from writerpool.proc import CA_VARIABLES, GIT_CA_VARIABLE

SERVER_NAME = "writerpool"
Client = Literal["claude-code", "codex"]
Scope = Literal["user", "project", "local"]

TARGETS: dict[str, tuple[Client, Scope]] = {
    "claude-code:user": ("claude-code", "user"),
    "claude-code:project": ("claude-code", "project"),
    "claude-code:local": ("claude-code", "local"),
    "codex:user": ("codex", "user"),
}
# Scopes bound to one project directory: Claude Code keys them by its working directory.
PROJECT_SCOPES = frozenset({"project", "local"})


@dataclass(frozen=True)
class Target:
    client: Client
    scope: Scope
    project: Path | None = None
    # Codex only: approve pi_session_prompt, so `codex exec` (approval policy never) can
    # prompt sessions; the operator's explicit choice (register --approve-prompts).
    approve_prompts: bool = False

    @property
    def name(self) -> str:
        return f"{self.client}:{self.scope}"

    @property
    def report_target(self) -> str:
        """Where findings point: no path, even for a project scope."""
        return f"client/{self.client}/{self.scope}"


def parse_target(text: str, project: str | None) -> Target:
    """A TARGET argument and the --project option, checked together."""
    if text not in TARGETS:
        raise UsageError(f"unknown target {text!r}; choose one of {', '.join(TARGETS)}")
    client, scope = TARGETS[text]
    if scope not in PROJECT_SCOPES:
        if project is not None:
            raise UsageError(f"{text} applies to every project; --project does not apply")
        return Target(client, scope)
    if project is None:
        raise UsageError(f"{text} needs --project DIR (the project the registration is for)")
    directory = Path(project).resolve()
    if not directory.is_dir():
        raise UsageError("--project must name an existing directory")
    return Target(client, scope, directory)


@dataclass(frozen=True)
class Registration:
    """A server as a client stores it: a stdio command (command, arguments, extra
    environment) or the pool service's URL with the header helper the client runs for
    its token (clients/http.py); and client settings of the entry that its `mcp add`
    cannot write (Codex: see clients/codex_config.py)."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    url: str | None = None
    helper: str | None = None

    @property
    def kind(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"

    def argv(self) -> list[str]:
        return [self.command, *self.args]


def server_command() -> list[str]:
    """This writerpool's server as an absolute command line: the running interpreter
    (kept as invoked, not resolved: a virtual environment is found through that path)."""
    return [os.path.abspath(sys.executable), "-m", "writerpool", "serve"]


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
    from writerpool.config.models import load_config  # noqa: PLC0415
    from writerpool.config.providers import resolve_provider  # noqa: PLC0415
    from writerpool.errors import WriterpoolError  # noqa: PLC0415

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
    from writerpool.clients.codex_config import wanted_settings  # noqa: PLC0415

    settings = wanted_settings(server_env_vars(paths), approve_prompts)
    return Registration(command, tuple(args), env, settings)
