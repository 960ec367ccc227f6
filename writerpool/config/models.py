"""The human-edited config.toml, validated strictly, and its fingerprint."""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from writerpool.config.allow_entry import DERIVED_SETS, normalize_host, parse_address, parse_entry
from writerpool.config.caps import Caps
from writerpool.config.hosts import LOCAL, HostConfig
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


AgentName = Literal["pi", "claude-code", "codex"]
# Agents that may run on the host (host mode): only pi, whose tools writerpool bounds
# there; the others run only where a container is the boundary (docs/security.md).
HOST_AGENTS: frozenset[str] = frozenset({"pi"})


class Profile(Strict):
    permission: Literal["read-only", "coding"]
    agent: AgentName = "pi"  # the agent program a session of this profile runs
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


SIZE_PATTERN = r"^[0-9]+[kmg]?$"
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value: str) -> int:
    """Bytes of a size written like `memory`: digits and an optional k, m or g."""
    if not re.fullmatch(SIZE_PATTERN, value):
        raise ValueError(f"not a size: {value!r}")
    digits, unit = (value[:-1], value[-1]) if value[-1] in "kmg" else (value, "")
    return int(digits) * _SIZE_UNITS[unit]


class Pool(Strict):
    lease_wait_seconds: float = Field(default=10.0, ge=0, le=600)
    memory: str = Field(default="4g", pattern=SIZE_PATTERN)
    cpus: float = Field(default=2.0, gt=0, le=256)
    pids: int = Field(default=1024, ge=16)
    session_close_seconds: float = Field(default=10.0, gt=0, le=120)
    # Per-session caps of the provider proxy (`provider` networking).
    egress_requests: int = Field(default=5000, ge=1)
    egress_bytes_up: str = Field(default="1g", pattern=SIZE_PATTERN)
    egress_bytes_down: str = Field(default="256m", pattern=SIZE_PATTERN)
    egress_concurrent: int = Field(default=8, ge=1, le=1024)
    # What one collection may import: files above the first, or beyond the second in
    # total, are not exported and make the collection incomplete.
    collect_max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    collect_max_total_bytes: int = Field(default=1024 * 1024 * 1024, ge=1)
    # The bundle streamed out of the writer's host (new commits as well as the work
    # tree): a larger one is refused and nothing is imported.
    collect_max_bundle_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=1)
    # Keep a writer's --cache directory across reset and recreate. Off by default: a
    # kept cache is a channel from one session to the next (a planted wheel or module).
    keep_caches: bool = False
    # A warm writer held longer than this is recycled (and warmed afresh): a long-lived
    # container and pi do not outlive what the operator expects of a fresh start.
    warm_max_age_seconds: float = Field(default=3600.0, ge=1, le=7 * 86400)

    def caps(self) -> Caps:
        return Caps(
            requests=self.egress_requests,
            bytes_up=parse_size(self.egress_bytes_up),
            bytes_down=parse_size(self.egress_bytes_down),
            concurrent=self.egress_concurrent,
        )


class EgressSet(Strict):
    hosts: tuple[str, ...] = Field(min_length=1, max_length=64)

    @model_validator(mode="after")
    def _entries(self) -> EgressSet:
        for host in self.hosts:
            try:
                parse_entry(host)
            except WriterpoolError as exc:
                raise ValueError(exc.message) from None
        return self


class Egress(Strict):
    """The allowlist proxy (`mode set --allow`): named sets, names it resolves itself,
    and its per-session caps."""

    sets: dict[Alias, EgressSet] = {}
    # Names the proxy resolves to these addresses instead of asking DNS: test hosts and
    # names only an internal resolver knows. The addresses are judged like DNS answers.
    resolve: dict[str, tuple[str, ...]] = {}
    # The CA bundle whose certificates writers with an allowlist trust (a network that
    # intercepts TLS, a company mirror); default: SSL_CERT_FILE, else the system's.
    ca_bundle: Annotated[Path, AfterValidator(_absolute)] | None = None
    # At most the connections a session's egress process has descriptors for.
    connect_concurrent: int = Field(default=32, ge=1, le=64)
    connect_total: int = Field(default=5000, ge=1)
    header_bytes: int = Field(default=16384, ge=1024, le=1048576)
    header_seconds: float = Field(default=10.0, gt=0, le=300)
    idle_seconds: float = Field(default=300.0, gt=0, le=86400)

    @model_validator(mode="after")
    def _names(self) -> Egress:
        for name in self.sets:
            if name in DERIVED_SETS:
                raise ValueError(f"set {name} is derived from this host; choose another name")
        for name, addresses in self.resolve.items():
            if normalize_host(name) != name or parse_address(name) is not None:
                raise ValueError("resolve: each key is a lower-case host name")
            if not addresses or any(parse_address(a) is None for a in addresses):
                raise ValueError(f"resolve.{name}: give one or more IP addresses")
        return self


class Service(Strict):
    # 0: the service picks a free port and records it (service.json, 0600). The
    # address is always 127.0.0.1: there is deliberately no setting for it.
    port: int = Field(0, ge=0, le=65535)


class Config(Strict):
    workspaces: dict[Alias, Annotated[Path, AfterValidator(_absolute)]] = {}
    profiles: dict[Alias, Profile] = {}
    providers: dict[Alias, Provider] = {}
    pool: Pool = Pool()
    egress: Egress = Egress()
    service: Service = Service()
    # Further Podman hosts reached over SSH; `local` is this machine's own.
    hosts: dict[Alias, HostConfig] = {}

    @model_validator(mode="after")
    def _local_is_reserved(self) -> Config:
        if LOCAL in self.hosts:
            raise ValueError(f"hosts.{LOCAL} is reserved for this machine's own Podman")
        return self

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


def parse_config(raw: bytes, name: str = "config.toml") -> Config:
    """The configuration in `raw`; errors name the file by `name` (its file name)."""
    try:
        data = loads_toml(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WriterpoolError("config_invalid", f"{name} is not valid TOML: {exc}") from exc
    except DocumentRefused as exc:
        raise WriterpoolError("config_invalid", f"{name} {exc.reason}") from exc
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise WriterpoolError("config_invalid", f"{name}: {describe_validation(exc)}") from exc


def fingerprint(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def config_name(paths: Paths) -> str:
    """How messages name the configuration file: its file name, and where it was set
    when WRITERPOOL_CONFIG chose it (messages carry no paths)."""
    name = "".join(c for c in paths.config_file.name if c.isprintable())[:80]
    return f"{name} (WRITERPOOL_CONFIG)" if os.environ.get("WRITERPOOL_CONFIG") else name


def load_config(paths: Paths) -> LoadedConfig:
    # The configuration may be a symlink (dotfile managers make them) to a regular file.
    name = config_name(paths)
    try:
        raw = read_regular(paths.config_file, follow=True)
    except FileNotFoundError as exc:
        raise WriterpoolError(
            "config_missing", "no configuration yet; run `writerpool config init`"
        ) from exc
    except OSError as exc:
        raise WriterpoolError("config_invalid", f"{name} is unreadable: {exc.strerror}") from exc
    except DocumentRefused as exc:
        raise WriterpoolError("config_invalid", f"{name} {exc.reason}") from exc
    return LoadedConfig(parse_config(raw, name), fingerprint(raw))
