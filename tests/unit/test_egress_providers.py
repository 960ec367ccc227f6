"""The one providers table: API kinds, built-ins, custom providers and their keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from writerpool.config.models import Config, Pool, Provider, parse_size
from writerpool.config.providers import (
    API_KINDS,
    BUILTINS,
    PLACEHOLDER_KEY,
    provider_key,
    resolve_provider,
)


def config(**providers: Provider) -> Config:
    return Config(providers=providers)


def allowed(api: str, method: str, path: str) -> bool:
    return any(m == method and re.fullmatch(p, path) for m, p in API_KINDS[api].routes)


def test_each_builtin_names_a_known_api_kind_and_an_https_endpoint() -> None:
    for name, builtin in BUILTINS.items():
        assert builtin.api in API_KINDS, name
        assert builtin.base_url.startswith("https://"), name
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", builtin.key_env), name


def test_routes_are_the_ones_pi_calls_and_nothing_else() -> None:
    assert allowed("openai-completions", "POST", "/chat/completions")
    assert allowed("openai-responses", "POST", "/responses")
    assert allowed("anthropic-messages", "POST", "/v1/messages")
    assert allowed("google-generative-ai", "POST", "/models/gemini-2.5-pro:streamGenerateContent")
    assert allowed("openai-completions", "GET", "/models")
    assert not allowed("openai-completions", "GET", "/chat/completions")
    assert not allowed("openai-completions", "POST", "/responses")
    assert not allowed("anthropic-messages", "POST", "/v1/messages/batches")
    assert not allowed("openai-responses", "POST", "/files")
    assert not allowed("google-generative-ai", "POST", "/models/a/b:generateContent")
    assert not allowed("google-generative-ai", "POST", "/tunedModels/x:generateContent")


def test_each_kind_puts_the_key_in_its_own_header() -> None:
    assert API_KINDS["openai-completions"].auth_value("k") == "Bearer k"
    assert API_KINDS["anthropic-messages"].auth_header == "x-api-key"
    assert API_KINDS["anthropic-messages"].auth_value("k") == "k"
    assert API_KINDS["google-generative-ai"].auth_header == "x-goog-api-key"


def test_a_custom_provider_wins_over_a_builtin_of_the_same_name() -> None:
    custom = Provider(base_url="http://127.0.0.1:9/v1", api="anthropic-messages",
                      api_key_env="LOCAL_KEY")  # fmt: skip
    resolved = resolve_provider(config(anthropic=custom), "anthropic")
    assert resolved is not None and not resolved.builtin
    assert resolved.base_url == "http://127.0.0.1:9/v1"
    assert resolved.api.name == "anthropic-messages" and resolved.key_env == "LOCAL_KEY"
    builtin = resolve_provider(config(), "anthropic")
    assert builtin is not None and builtin.builtin
    assert builtin.base_url == "https://api.anthropic.com"
    assert resolve_provider(config(), "no-such-provider") is None


def test_custom_provider_keys_come_from_their_variable_or_are_a_placeholder() -> None:
    keyed_provider = Provider(base_url="http://x/v1", api_key_env="K")
    keyed = resolve_provider(config(local=keyed_provider), "local")
    plain = resolve_provider(config(local=Provider(base_url="http://x/v1")), "local")
    assert keyed is not None and plain is not None
    assert provider_key(keyed, {"K": "sk-local"}) == "sk-local"
    assert provider_key(keyed, {"OPENAI_API_KEY": "x"}) is None
    assert provider_key(keyed, {"K": "bad\nkey"}) is None
    assert provider_key(plain, {}) == PLACEHOLDER_KEY


def test_builtin_keys_come_from_the_usual_variable_then_plain_store_entries(
    tmp_path: Path,
) -> None:
    store = tmp_path / "auth.json"
    store.write_text(json.dumps({
        "anthropic": {"type": "api_key", "key": "sk-ant-store"},
        "openai": {"type": "oauth", "access": "tok", "refresh": "r", "expires": 0},
        "google": {"type": "api_key", "key": "!cat /etc/passwd"},
    }))  # fmt: skip
    names = ("anthropic", "openai", "google")
    anthropic, openai, google = (resolve_provider(config(), n) for n in names)
    assert anthropic is not None and openai is not None and google is not None
    assert provider_key(anthropic, {"ANTHROPIC_API_KEY": "sk-ant-env"}, store) == "sk-ant-env"
    assert provider_key(anthropic, {}, store) == "sk-ant-store"
    assert provider_key(openai, {}, store) is None  # an OAuth login is never used
    assert provider_key(google, {}, store) is None  # nor a command
    assert provider_key(anthropic, {}, tmp_path / "none.json") is None
    home = tmp_path / "home" / ".pi" / "agent"
    home.mkdir(parents=True)
    (home / "auth.json").write_text(json.dumps({"anthropic": {"type": "api_key", "key": "sk-h"}}))
    assert provider_key(anthropic, {"HOME": str(tmp_path / "home")}) == "sk-h"
    assert provider_key(anthropic, {"PI_CODING_AGENT_DIR": str(home)}) == "sk-h"


def test_pool_caps_have_defaults_and_parse_sizes() -> None:
    caps = Pool().caps()
    assert caps.requests == 5000 and caps.concurrent == 8
    assert caps.bytes_up == 1024**3 and caps.bytes_down == 256 * 1024**2
    assert Pool(egress_bytes_up="10k").caps().bytes_up == 10240
    assert parse_size("7") == 7
    with pytest.raises(ValueError):
        parse_size("1t")
