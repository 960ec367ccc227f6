"""How a pi process is configured: its private agent directory, credential, flags, env.

The agent directory holds `models.json` (a custom provider's endpoint) and
`settings.json` (auto-retry off). While a session runs, `models.json` also carries the
one credential of the session's provider, as that provider's `apiKey`; between
sessions a custom provider's `apiKey` is a placeholder (pi requires one).

The key does not go to pi's own credential store, `auth.json`: pi 0.73.1 reads that
file only under a lock file created beside it, so in an agent directory mounted
read-only the credential would be silently ignored. `models.json` is read plainly.

pi's session (its transcript) is the null device, never `--no-session`: pi 0.73.1 gives
a `--no-session` process an in-memory session whose directory is "", and ignores
`--session-dir`, PI_CODING_AGENT_SESSION_DIR and settings then; any session pi derives
from it (`new_session`, `fork`) is created with that directory, so its file lands in
pi's working directory, the clone. `--session /dev/null` writes every entry to the null
device, and a derived session goes to the absolute `--session-dir` the caller names
(the flag wins over the variable and the settings), outside the clone.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from writerpool.agent.compact import install_preload
from writerpool.atomic import write_atomic
from writerpool.config.models import Config, Profile, Provider
from writerpool.config.providers import PLACEHOLDER_KEY, ResolvedProvider, usable_key
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, run

READ_ONLY_TOOLS = "read,grep,find,ls"
CODING_TOOLS = "read,bash,edit,write,grep,find,ls"
# pi's session file: what pi writes of its transcript goes nowhere (see above).
NULL_SESSION = "/dev/null"
# A container's session directory: on its /tmp tmpfs, outside /work, gone with it.
CONTAINER_SESSION_DIR = "/tmp/pi-sessions"
# Used when the caller names no model: pi turns an unknown `--model M` of a provider
# into a copy of that provider's first model with id M (limits included).
TEMPLATE_MODEL = "writerpool-template-model"

FD_SHIM = """#!/bin/sh
# Written by writerpool. pi passes --no-require-git, which this host's fd predates;
# inside a git checkout (where sessions run) the flag changes nothing, so drop it.
for arg do
    shift
    [ "$arg" = --no-require-git ] || set -- "$@" "$arg"
done
exec {fd} "$@"
"""


# -- the agent directory -------------------------------------------------------


def models_document(
    provider_name: str, provider: Provider, container: bool, models: Sequence[str] = ()
) -> dict[str, Any]:
    """pi's models.json for one custom provider (no secret in it)."""
    url = (provider.container_base_url or provider.base_url) if container else provider.base_url
    entry: dict[str, Any] = {
        "baseUrl": url,
        "api": provider.api,
        "apiKey": PLACEHOLDER_KEY,
        "models": [
            {"id": model, "contextWindow": provider.context_window,
             "maxTokens": provider.max_tokens}
            for model in (list(dict.fromkeys(models)) or [TEMPLATE_MODEL])
        ],
    }  # fmt: skip
    if provider.api == "openai-completions":
        # Plain OpenAI-compatible servers know neither the developer role, reasoning
        # effort nor `store`; pi would otherwise send them to endpoints it does not know.
        entry["compat"] = {
            "supportsDeveloperRole": False,
            "supportsReasoningEffort": False,
            "supportsStore": False,
        }
    return {"providers": {provider_name: entry}}


def render_agent_dir(
    agent_dir: Path,
    provider_name: str,
    provider: Provider | None,
    container: bool,
    models: Sequence[str] = (),
) -> None:
    """Write models.json (custom providers only) and settings.json into agent_dir.

    `models`: the model ids profiles use with this provider; pass them, because pi's
    fuzzy model matching could otherwise pick the template entry for a short name.
    """
    agent_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(agent_dir, 0o700)
    models_file = agent_dir / "models.json"
    if provider is not None:
        document = models_document(provider_name, provider, container, models)
        write_atomic(models_file, _json(document), durable=False)
    else:
        models_file.unlink(missing_ok=True)
    # Auto-retry would end one prompt with several agent_end events.
    write_atomic(agent_dir / "settings.json", _json({"retry": {"enabled": False}}), durable=False)
    _render_tool_shims(agent_dir, container)
    install_preload(agent_dir)  # keeps pi's RPC output linear (agent/compact.py)


def render_for_profile(
    config: Config, agent_dir: Path, provider_name: str, container: bool
) -> None:
    """Render agent_dir for one provider with every model the profiles use with it."""
    models = [p.model for p in config.profiles.values() if p.provider == provider_name]
    render_agent_dir(
        agent_dir, provider_name, config.providers.get(provider_name), container, models
    )


def _json(document: object) -> bytes:
    return json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"


def _render_tool_shims(agent_dir: Path, container: bool) -> None:
    # pi looks for its helper tools in <agent dir>/bin before PATH.
    shim = agent_dir / "bin" / "fd"
    target = None if container else _fd_needing_shim()
    if target is None:
        shim.unlink(missing_ok=True)
        return
    shim.parent.mkdir(mode=0o700, exist_ok=True)
    write_atomic(shim, FD_SHIM.format(fd=target).encode(), mode=0o700)


@functools.cache
def _fd_needing_shim() -> str | None:
    """The host's fd when it rejects --no-require-git (fd < 8.7), else None."""
    found = shutil.which("fd") or shutil.which("fdfind")
    if found is None:
        return None
    try:
        probe = run([found, "--no-require-git", "--version"], timeout=10, check=False)
    except CommandFailed:
        return None
    return found if probe.returncode != 0 else None


# -- credentials ---------------------------------------------------------------


def install_credential(agent_dir: Path, provider_name: str, key: str) -> None:
    """Put exactly this provider's key into agent_dir/models.json (0600)."""
    if not usable_key(key):
        raise WriterpoolError(
            "provider_unconfigured", f"the credential for provider {provider_name} is unusable"
        )
    # pi prefers auth.json over models.json; a leftover one must not shadow this key.
    (agent_dir / "auth.json").unlink(missing_ok=True)
    document = _read_models(agent_dir)
    if document is None:
        raise WriterpoolError("session_start_failed", "the agent directory is unreadable")
    providers = document.setdefault("providers", {})
    entry = providers.get(provider_name)
    if isinstance(entry, dict) and entry.get("models"):
        entry["apiKey"] = key  # a custom provider rendered by render_agent_dir
    else:
        # A built-in provider: pi accepts a key-only entry once it names one of its
        # override fields; empty headers change nothing.
        providers[provider_name] = {"apiKey": key, "headers": {}}
    write_atomic(agent_dir / "models.json", _json(document), durable=False)


def point_at_proxy(agent_dir: Path, provider: ResolvedProvider, base_url: str, token: str) -> None:
    """Send this provider's requests to the session's proxy, with the session's token as
    the key (the proxy swaps it for the real one)."""
    document = _read_models(agent_dir)
    if document is None:
        raise WriterpoolError("session_start_failed", "the agent directory is unreadable")
    providers = document.setdefault("providers", {})
    entry = providers.get(provider.name)
    if not (isinstance(entry, dict) and entry.get("models")):
        # A built-in provider: pi takes a models-less entry that names its baseUrl.
        entry = providers[provider.name] = {}
    entry["baseUrl"] = base_url
    entry["apiKey"] = token
    write_atomic(agent_dir / "models.json", _json(document), durable=False)


def remove_credential(agent_dir: Path) -> None:
    """Take the session's credential out of the agent directory (idempotent). A file
    that holds none is left as it is: each session's start (of any agent) calls this."""
    (agent_dir / "auth.json").unlink(missing_ok=True)
    models_file = agent_dir / "models.json"
    document = _read_models(agent_dir)
    if document is None:
        models_file.unlink(missing_ok=True)  # unreadable: drop it, key and all
        return
    providers = document.get("providers", {})
    changed = False
    for name, entry in list(providers.items()):
        if isinstance(entry, dict) and entry.get("models"):
            changed |= entry.get("apiKey") != PLACEHOLDER_KEY
            entry["apiKey"] = PLACEHOLDER_KEY
        else:
            del providers[name]  # a key-only entry of a built-in provider
            changed = True
    if not providers:
        models_file.unlink(missing_ok=True)
    elif changed:
        write_atomic(models_file, _json(document))


def _read_models(agent_dir: Path) -> dict[str, Any] | None:
    """models.json as written by writerpool; {} when absent, None when unreadable."""
    try:
        document = json.loads((agent_dir / "models.json").read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("providers", {}), dict):
        return None
    return document


# -- the process ---------------------------------------------------------------


def pi_args(
    profile: Profile, read_only: bool, agent_dir: str | Path, *, session_dir: str | Path
) -> list[str]:
    """pi's flags for a session of this profile (the executable is the caller's).

    `agent_dir` reaches pi through PI_CODING_AGENT_DIR (agent/environment.py); pi has no flag
    for it, so it is accepted here only to keep argv and env built from one value.
    `session_dir`: an absolute directory outside pi's working directory, private to the
    session (CONTAINER_SESSION_DIR in a container); pi makes it and writes nothing there
    unless something makes it derive a session.
    """
    del agent_dir
    if not PurePosixPath(session_dir).is_absolute():
        raise ValueError("pi's session directory must be absolute (a relative one is the cwd's)")
    # A read-only profile never gets writing tools, whatever the caller asked.
    tools = READ_ONLY_TOOLS if read_only or profile.permission == "read-only" else CODING_TOOLS
    return [
        "--mode", "rpc", "--offline",
        "--session", NULL_SESSION, "--session-dir", str(session_dir),
        "--provider", profile.provider, "--model", profile.model,
        "--thinking", profile.thinking,
        "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-context-files",
        "--tools", tools,
    ]  # fmt: skip
