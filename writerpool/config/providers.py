"""The one table of LLM providers: how pi talks to each, and where its key comes from.

Facts read from pi 0.73.1 (`@mariozechner/pi-ai` 0.73.1 and the SDKs it pins:
`@anthropic-ai/sdk` 0.91, `openai` 6.26, `@google/genai` 1.x):

- An *API kind* fixes the header pi puts the key in and the paths it calls, relative
  to the provider's `baseUrl` (the SDKs append their path to it):
  `openai-completions` POST `/chat/completions`; `openai-responses` POST `/responses`
  (both `Authorization: Bearer <key>`); `anthropic-messages` POST `/v1/messages`
  (`x-api-key: <key>`, since the base URL carries no `/v1`); `google-generative-ai`
  POST `/models/<model>:streamGenerateContent?alt=sse` (`x-goog-api-key: <key>`, the
  base URL already ends in `/v1beta` and pi sets the SDK's apiVersion to "").
  Model listings (GET) are allowed too; pi 0.73.1 does not call them in a session.
- A built-in provider's `baseUrl` and `apiKey` can be overridden in `models.json`
  without listing models: `{"providers": {"anthropic": {"baseUrl": "…", "apiKey": "…"}}}`
  (pi accepts a models-less entry once it names `baseUrl`, `headers`, `compat` or
  `modelOverrides`; the base URL then applies to every built-in model of it).
- pi resolves a key in this order: its auth store (`auth.json`), the provider's usual
  environment variable (for anthropic `ANTHROPIC_OAUTH_TOKEN` before
  `ANTHROPIC_API_KEY`), then `models.json`'s `apiKey`, which it runs as a shell
  command when it starts with "!" and reads as an environment variable name first.
  An anthropic key containing `sk-ant-oat` is treated as an OAuth token (Bearer auth,
  Claude Code headers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the egress process reads providers without the models
    from writerpool.config.models import Config

# A custom provider that needs no key still needs some key for pi; this one is sent.
PLACEHOLDER_KEY = "scripted"


@dataclass(frozen=True)
class ApiKind:
    """How pi speaks one provider API: where the key goes and which routes it calls.

    `routes` are (METHOD, regular expression) pairs, matched in full against the
    request path relative to the base URL's path (no query string).
    """

    name: str
    auth_header: str  # lower case; "authorization" carries "Bearer <key>"
    routes: tuple[tuple[str, str], ...]

    def auth_value(self, key: str) -> str:
        return f"Bearer {key}" if self.auth_header == "authorization" else key


_GOOGLE_MODEL = r"/models/[A-Za-z0-9][A-Za-z0-9._-]{0,127}"

API_KINDS: Mapping[str, ApiKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            ApiKind(
                "openai-completions",
                "authorization",
                (("POST", r"/chat/completions"), ("GET", r"/models")),
            ),
            ApiKind(
                "openai-responses",
                "authorization",
                (("POST", r"/responses"), ("GET", r"/models")),
            ),
            ApiKind(
                "anthropic-messages",
                "x-api-key",
                (
                    ("POST", r"/v1/messages"),
                    ("POST", r"/v1/messages/count_tokens"),
                    ("GET", r"/v1/models"),
                ),
            ),
            ApiKind(
                "google-generative-ai",
                "x-goog-api-key",
                (
                    ("POST", _GOOGLE_MODEL + r":(?:streamGenerateContent|generateContent)"),
                    ("POST", _GOOGLE_MODEL + r":countTokens"),
                    ("GET", r"/models"),
                ),
            ),
        )
    }
)


@dataclass(frozen=True)
class Builtin:
    """One of pi's built-in providers writerpool supports: its API, URL and key variable."""

    api: str
    base_url: str
    key_env: str


# pi-ai 0.73.1's models.generated.js (api, baseUrl) and env-api-keys.js (variable).
# Left out: providers pi reaches only with an OAuth login (github-copilot,
# openai-codex), with cloud credentials (amazon-bedrock, google-vertex), with
# per-account URL templates (azure, cloudflare) or through an API kind of its own
# (mistral-conversations).
BUILTINS: Mapping[str, Builtin] = MappingProxyType(
    {
        "anthropic": Builtin(
            "anthropic-messages", "https://api.anthropic.com", "ANTHROPIC_API_KEY"
        ),
        "openai": Builtin("openai-responses", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        "google": Builtin(
            "google-generative-ai",
            "https://generativelanguage.googleapis.com/v1beta",
            "GEMINI_API_KEY",
        ),
        "groq": Builtin("openai-completions", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        "cerebras": Builtin("openai-completions", "https://api.cerebras.ai/v1", "CEREBRAS_API_KEY"),
        "xai": Builtin("openai-completions", "https://api.x.ai/v1", "XAI_API_KEY"),
        "openrouter": Builtin(
            "openai-completions", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"
        ),
        "deepseek": Builtin("openai-completions", "https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    }
)


@dataclass(frozen=True)
class ResolvedProvider:
    """A provider as the proxy and the agent directory need it."""

    name: str
    api: ApiKind
    base_url: str  # the real endpoint, as reached from the host
    key_env: str | None  # None: a custom provider that needs no key
    builtin: bool


def resolve_provider(config: Config, name: str) -> ResolvedProvider | None:
    """A custom provider of config.toml (`[providers.NAME]`, it wins) or a built-in one."""
    custom = config.providers.get(name)
    if custom is not None:
        return ResolvedProvider(
            name, API_KINDS[custom.api], custom.base_url, custom.api_key_env, builtin=False
        )
    builtin = BUILTINS.get(name)
    if builtin is None:
        return None
    return ResolvedProvider(
        name, API_KINDS[builtin.api], builtin.base_url, builtin.key_env, builtin=True
    )


def provider_key(
    resolved: ResolvedProvider,
    environ: Mapping[str, str] | None = None,
    auth_file: Path | None = None,
) -> str | None:
    """The one key this provider needs, or None when none is available.

    Custom providers: the variable named by `api_key_env`, else a placeholder (the
    endpoint needs no key). Built-in providers: the usual environment variable, else
    that provider's plain `api_key` entry of the operator's pi auth store; never an
    OAuth login, never a "!command" key.
    """
    env = os.environ if environ is None else environ
    if not resolved.builtin:
        if resolved.key_env is None:
            return PLACEHOLDER_KEY
        value = env.get(resolved.key_env) or None
        return value if value is not None and usable_key(value) else None
    if resolved.key_env and env.get(resolved.key_env):
        value = env[resolved.key_env]
        return value if usable_key(value) else None
    return _auth_store_key(resolved.name, auth_file or host_auth_file(env))


def host_auth_file(env: Mapping[str, str]) -> Path:
    """The operator's pi auth store: $PI_CODING_AGENT_DIR/auth.json or ~/.pi/agent."""
    agent_dir = env.get("PI_CODING_AGENT_DIR")
    if agent_dir:
        return Path(agent_dir).expanduser() / "auth.json"
    return Path(env.get("HOME") or Path.home()) / ".pi" / "agent" / "auth.json"


def _auth_store_key(provider_name: str, auth_file: Path) -> str | None:
    """Only `provider_name`'s plain API key; OAuth logins and commands are not used."""
    try:
        store = json.loads(auth_file.read_bytes())
    except (OSError, ValueError):
        return None
    entry = store.get(provider_name) if isinstance(store, dict) else None
    if not isinstance(entry, dict) or entry.get("type") != "api_key":
        return None
    key = entry.get("key")
    if not isinstance(key, str) or not usable_key(key):
        return None
    return key


def usable_key(key: str) -> bool:
    """A key that can go into a header as it is; pi runs a "!…" key as a shell command."""
    return bool(key) and not key.startswith("!") and key.isprintable() and key.strip() == key
