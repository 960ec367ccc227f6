"""The human-edited config.toml, validated strictly, and its fingerprint."""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.untrusted import DocumentRefused, loads_toml, read_regular

ALIAS_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
Thinking = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


def _alias(value: str) -> str:
    if not ALIAS_RE.fullmatch(value):
        raise ValueError("alias must match ^[a-z][a-z0-9_-]{0,63}$")
    return value


Alias = Annotated[str, AfterValidator(_alias)]


def _absolute(value: Path) -> Path:
    if not value.is_absolute():
        raise ValueError("workspace path must be absolute")
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Profile(Strict):
    permission: Literal["read-only", "coding"]
    provider: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_.-]*$")
    model: str = Field(min_length=1, max_length=128)
    thinking: Thinking = "medium"
    default: bool = False


class Provider(Strict):
    """A provider pi does not know itself: an OpenAI-compatible endpoint."""

    base_url: str = Field(pattern=r"^https?://[^@\s]+$")
    container_base_url: str | None = Field(default=None, pattern=r"^https?://[^@\s]+$")
    api: Literal["openai-completions", "openai-responses", "anthropic-messages"] = (
        "openai-completions"
    )
    # Name of the environment variable holding the key; never the key itself.
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Z_][A-Z0-9_]*$")
    context_window: int = 128000
    max_tokens: int = 8192


class Pool(Strict):
    lease_wait_seconds: float = Field(default=10.0, ge=0, le=600)
    memory: str = Field(default="4g", pattern=r"^[0-9]+[kmg]?$")
    cpus: float = Field(default=2.0, gt=0, le=256)
    pids: int = Field(default=1024, ge=16)
    session_close_seconds: float = Field(default=10.0, gt=0, le=120)


class Config(Strict):
    workspaces: dict[Alias, Annotated[Path, AfterValidator(_absolute)]] = {}
    profiles: dict[Alias, Profile] = {}
    providers: dict[Alias, Provider] = {}
    pool: Pool = Pool()

    @model_validator(mode="after")
    def _one_read_only_default(self) -> Config:
        if not self.profiles:
            return self
        defaults = [name for name, p in self.profiles.items() if p.default]
        if len(defaults) != 1:
            raise ValueError("exactly one profile must have default = true")
        if self.profiles[defaults[0]].permission != "read-only":
            raise ValueError("the default profile must be read-only")
        return self

    def default_profile(self) -> str:
        return next(name for name, p in self.profiles.items() if p.default)


@dataclass(frozen=True)
class LoadedConfig:
    config: Config
    fingerprint: str


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def describe_validation(exc: ValidationError) -> str:
    """Name each bad key's location; never echo the offending value."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = _location(tuple(err["loc"]))
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_config(raw: bytes) -> Config:
    try:
        data = loads_toml(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WriterpoolError("config_invalid", f"config.toml is not valid TOML: {exc}") from exc
    except DocumentRefused as exc:
        raise WriterpoolError("config_invalid", f"config.toml {exc.reason}") from exc
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise WriterpoolError("config_invalid", f"config.toml: {describe_validation(exc)}") from exc


def fingerprint(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def load_config(paths: Paths) -> LoadedConfig:
    # The configuration may be a symlink (dotfile managers make them) to a regular file.
    try:
        raw = read_regular(paths.config_file, follow=True)
    except FileNotFoundError as exc:
        raise WriterpoolError(
            "config_missing", "no configuration yet; run `writerpool config init`"
        ) from exc
    except OSError as exc:
        raise WriterpoolError(
            "config_invalid", f"config.toml is unreadable: {exc.strerror}"
        ) from exc
    except DocumentRefused as exc:
        raise WriterpoolError("config_invalid", f"config.toml {exc.reason}") from exc
    return LoadedConfig(parse_config(raw), fingerprint(raw))
