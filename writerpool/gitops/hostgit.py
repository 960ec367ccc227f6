"""git on the host, with a clean environment and no hooks or fsmonitor.

Only for the operator's checkout (trusted, but still run without the user's global
or system configuration) and for repositories writerpool has just made itself.
Never for a writer's clone after an agent has touched it: read those with dulwich.
"""

from __future__ import annotations

from pathlib import Path

from writerpool import proc
from writerpool.proc import CommandFailed, Completed

__all__ = ["CommandFailed", "Completed", "git", "git_env", "git_reason"]

DEFAULT_TIMEOUT = 300.0

# Settings that would run a program or read user files; forced off on every call
# so that neither the environment nor a repository's own config turns them on.
_FORCED = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
)


def git_env() -> dict[str, str]:
    """The environment every host git process gets: no system or global config."""
    return proc.clean_env(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
    )


def git(
    repo: Path,
    *args: str,
    timeout: float = DEFAULT_TIMEOUT,
    input: bytes | None = None,
    check: bool = True,
) -> Completed:
    """Run `git -C repo <forced settings> args...`; raise CommandFailed on failure.

    Callers pass user-supplied refs only after `--` or `--end-of-options`, or after
    validating them (no leading `-`).
    """
    argv = ["git", "-C", str(repo)]
    for setting in _FORCED:
        argv += ["-c", setting]
    argv += list(args)
    return proc.run(argv, env=git_env(), timeout=timeout, input=input, check=check)


def git_reason(exc: CommandFailed) -> str:
    """git's own first `fatal:` or `error:` line (else its last line), for a message."""
    lines = exc.stderr.decode(errors="replace").strip().splitlines()
    said = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (said[0] if said else proc.last_line(exc.stderr, f"git exited {exc.returncode}"))[:300]
