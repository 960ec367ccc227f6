"""Running a client's own command line tool (claude, codex): found on PATH, run with a
minimal environment and a timeout. writerpool edits a client's files itself only where
the tool cannot write a setting (Codex: clients/codex_config.py)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, Completed, clean_env, run

# Variables that choose where a client keeps its configuration, or where writerpool's
# own state lies (a health check may start the server); never credentials.
PASSTHROUGH = (
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
)
CLIENT_TIMEOUT = 90.0


@dataclass(frozen=True)
class ClientCli:
    """One client's executable. `settings` are variables the client itself reads."""

    program: str
    label: str
    settings: Mapping[str, str] = field(default_factory=dict)

    @property
    def path(self) -> str | None:
        return shutil.which(self.program)

    def argv(self, args: Sequence[str]) -> list[str]:
        """The exact command line, with the executable's path when it is installed."""
        return [self.path or self.program, *args]

    def env(self) -> dict[str, str]:
        env = clean_env({k: os.environ[k] for k in PASSTHROUGH if k in os.environ})
        env.update(self.settings)
        return env

    def require(self) -> str:
        path = self.path
        if path is None:
            raise WriterpoolError(
                "client_unavailable", f"{self.label}'s `{self.program}` command is not on PATH"
            )
        return path

    def run(self, args: Sequence[str], cwd: Path, stdin: bytes | None = None) -> Completed:
        """Run the tool; its exit status is the caller's to judge. What goes in `args` is
        visible to every account (/proc/PID/cmdline): anything secret goes in `stdin`."""
        argv = [self.require(), *args]
        try:
            return run(argv, cwd=cwd, env=self.env(), timeout=CLIENT_TIMEOUT, check=False,
                       input=stdin)  # fmt: skip
        except CommandFailed as exc:  # only a timeout or a vanished executable get here
            raise WriterpoolError(
                "client_failed", f"`{self.program} {' '.join(args[:2])}` did not finish"
            ) from exc

    def fail(self, args: Sequence[str], done: Completed) -> WriterpoolError:
        """The error for an unexpected exit, naming the tool's last line (sanitized later)."""
        lines = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
        last = lines[-1][:200] if lines else "no output"
        return WriterpoolError(
            "client_failed",
            f"`{self.program} {' '.join(args[:2])}` exited {done.returncode}: {last}",
        )
