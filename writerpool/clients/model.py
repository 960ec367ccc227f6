"""Registration targets, the registration a client stores, and writerpool's server command."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from writerpool.errors import UsageError

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
