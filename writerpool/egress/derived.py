"""Sets derived from this host's package managers: the index and registry URLs pip, uv
and npm are configured with (a company's mirror is allowed as configured), and, for a
tool configured with no index of its own, the tool's own default, taken from the tool
at run time, never written here: pip's from pip's model of its default index (the index
and the host its files are served from), uv's likewise (uv's default index is the same
Python Package Index; uv is not a library writerpool can ask), npm's by asking npm
(`npm config get registry`; its tarballs come from the registry's host).

Only the host part of each URL is kept (user info, paths and queries are dropped: a URL
may carry a token). Each set says where its hosts came from (`DerivedSet.source`); a
set is derived only when an allowlist names it. A set that still names no host (the
tool is missing, or configured only with `file:` URLs) is refused with what to do.
"""

from __future__ import annotations

import configparser
import importlib
import os
import shutil
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from writerpool import proc
from writerpool.config.allow_entry import DERIVED_SETS, Entry, parse_entry
from writerpool.config.models import Config
from writerpool.egress.allowlist import expand
from writerpool.errors import WriterpoolError

MAX_CONFIG_BYTES = 256 * 1024
_PIP_KEYS = ("index-url", "extra-index-url")
_PIP_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
_UV_ENV = ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX")
NPM_TIMEOUT = 30.0


def url_entry(url: str) -> str | None:
    """`https://user:x@mirror.test:8443/simple` → `mirror.test:8443`; None if unusable."""
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in ("https", "http") or not host:
        return None
    word = host if port is None else f"{host}:{port}"
    word = f"http://{word}" if parts.scheme == "http" else word
    try:
        return parse_entry(word).text
    except WriterpoolError:
        return None


def _read(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def _config_dir(environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else Path(environ.get("HOME", "/nonexistent")) / ".config"


def pip_urls(environ: Mapping[str, str]) -> list[str]:
    home = Path(environ.get("HOME", "/nonexistent"))
    files = [Path("/etc/pip.conf"), home / ".pip" / "pip.conf",
             _config_dir(environ) / "pip" / "pip.conf"]  # fmt: skip
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    urls = [w for var in _PIP_ENV for w in environ.get(var, "").split()]
    for path in files:
        text = _read(path)
        if text is None:
            continue
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        for section in parser.sections():
            for key in _PIP_KEYS:
                urls += parser.get(section, key, fallback="").split()
    return urls


def uv_urls(environ: Mapping[str, str]) -> list[str]:
    urls = [w for var in _UV_ENV for w in environ.get(var, "").replace(",", " ").split()]
    urls = [u.partition("=")[2] if "=" in u.partition("://")[0] else u for u in urls]
    text = _read(_config_dir(environ) / "uv" / "uv.toml")
    if text is None:
        return urls
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return urls
    for key in ("index-url", "extra-index-url"):
        value = document.get(key)
        values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        urls += [v for v in values if isinstance(v, str)]
    for index in document.get("index", []) if isinstance(document.get("index"), list) else []:
        if isinstance(index, dict) and isinstance(index.get("url"), str):
            urls.append(index["url"])
    return urls


def npm_urls(environ: Mapping[str, str]) -> tuple[list[str], bool]:
    """The registries npm is configured with here, and whether one is the default
    (unscoped) registry."""
    urls = [environ[k] for k in ("npm_config_registry", "NPM_CONFIG_REGISTRY") if environ.get(k)]
    default = bool(urls)
    home = Path(environ.get("HOME", "/nonexistent"))
    for path in (Path(environ.get("NPM_CONFIG_USERCONFIG", home / ".npmrc")),):
        text = _read(path)
        for line in (text or "").splitlines():
            key, sep, value = line.partition("=")
            if sep and (key.strip() == "registry" or key.strip().endswith(":registry")):
                urls.append(value.strip())
                default = default or key.strip() == "registry"
    return urls, default


def pip_default() -> list[str]:
    """pip's default index and the host its files are served from, from pip's own model
    of them (the pip of this interpreter); empty when pip is not importable here."""
    try:
        index = importlib.import_module("pip._internal.models.index")
        return [str(index.PyPI.url), f"https://{index.PyPI.file_storage_domain}/"]
    except (ImportError, AttributeError):
        return []


def npm_registry(environ: Mapping[str, str]) -> list[str]:
    """The registry npm itself uses with this environment (its global and built-in
    configuration, else its default); empty when npm is not on PATH or says nothing."""
    npm = shutil.which("npm", path=environ.get("PATH", ""))
    if npm is None:
        return []
    try:
        done = proc.run([npm, "config", "get", "registry"], env=dict(environ),
                        timeout=NPM_TIMEOUT)  # fmt: skip
    except WriterpoolError:
        return []
    answer = done.stdout.decode("utf-8", "replace").strip().splitlines()
    return answer[:1]


@dataclass(frozen=True)
class Defaults:
    """Where the tools' own defaults come from (the tools themselves; tests may inject)."""

    pip: Callable[[], list[str]] = pip_default
    npm: Callable[[Mapping[str, str]], list[str]] = npm_registry


@dataclass(frozen=True)
class DerivedSet:
    name: str
    hosts: tuple[str, ...]
    source: str  # where the hosts came from, in words


_PIP_CONFIG = "pip's configuration (pip.conf, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL)"
_PIP_DEFAULT = "pip's default index and its files host (no index configured; from pip's model)"
_UV_CONFIG = "uv's configuration (uv.toml, UV_*INDEX*)"
_UV_DEFAULT = (
    "uv's default index, the Python Package Index, and its files host (no index "
    "configured; their hosts from pip's model)"
)
_NPM_CONFIG = "npm's configuration (the home directory's .npmrc, npm_config_registry)"
_NPM_ASKED = "npm's registry as npm reports it (npm config get registry)"


def derive(name: str, environ: Mapping[str, str], defaults: Defaults = Defaults()) -> DerivedSet:
    """One of `host-pip`, `host-uv`, `host-npm`: the tool's configured hosts, or its own
    default when it is configured with no index of its own."""
    if name == "host-pip":
        urls, source = pip_urls(environ), _PIP_CONFIG
        if not urls:
            urls, source = defaults.pip(), _PIP_DEFAULT
    elif name == "host-uv":
        urls, source = uv_urls(environ), _UV_CONFIG
        if not urls:
            urls, source = defaults.pip(), _UV_DEFAULT
    elif name == "host-npm":
        urls, default = npm_urls(environ)
        source = _NPM_CONFIG
        if not default:
            asked = defaults.npm(environ)
            urls, source = asked + urls, _NPM_ASKED + (f" and {_NPM_CONFIG}" if urls else "")
    else:
        raise KeyError(name)
    hosts = tuple(dict.fromkeys(e for e in map(url_entry, urls) if e is not None))
    return DerivedSet(name, hosts, source)


def derived_sets(
    environ: Mapping[str, str] | None = None, defaults: Defaults = Defaults()
) -> dict[str, DerivedSet]:
    """Every derived set, each with where its hosts came from (`egress sets`)."""
    env = os.environ if environ is None else environ
    return {name: derive(name, env, defaults) for name in DERIVED_SETS}


_EMPTY = {
    "host-pip": "pip is configured only with indexes that are not http(s) URLs, or pip is "
    "not importable here; list your index's host instead (--allow pypi.mirror.test)",
    "host-uv": "uv is configured only with indexes that are not http(s) URLs, or pip (whose "
    "model names uv's default index) is not importable here; list your index's host "
    "instead (--allow pypi.mirror.test)",
    "host-npm": "npm's registry is configured as no http(s) URL, or none is configured "
    "(.npmrc, npm_config_registry) and npm is not on PATH to say its own; install npm, "
    "or list your registry's host instead (--allow npm.mirror.test)",
}


class KnownSets(Mapping[str, tuple[str, ...]]):
    """Every set an allowlist may name: the config's, and the derived ones, each derived
    when it is first looked up (a tool is asked only when a set of it is named)."""

    def __init__(
        self, config: Config, environ: Mapping[str, str], defaults: Defaults = Defaults()
    ) -> None:
        self._configured = {name: s.hosts for name, s in config.egress.sets.items()}
        self._environ, self._defaults = environ, defaults
        self.derived: dict[str, DerivedSet] = {}

    def __getitem__(self, name: str) -> tuple[str, ...]:
        if name in self._configured:
            return self._configured[name]
        if name not in DERIVED_SETS:
            raise KeyError(name)
        if name not in self.derived:
            self.derived[name] = derive(name, self._environ, self._defaults)
        return self.derived[name].hosts

    def __contains__(self, name: object) -> bool:
        return name in self._configured or name in DERIVED_SETS

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._configured, *DERIVED_SETS]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self._configured, *DERIVED_SETS]))

    def why_empty(self, name: str) -> str:
        return _EMPTY.get(name, "its [egress.sets] table lists no host")


def known_sets(
    config: Config, environ: Mapping[str, str] | None = None, defaults: Defaults = Defaults()
) -> KnownSets:
    """Every set an allowlist may name: the config's and the derived ones."""
    return KnownSets(config, os.environ if environ is None else environ, defaults)


def resolve_allowlist(
    config: Config,
    words: tuple[str, ...],
    environ: Mapping[str, str] | None = None,
    defaults: Defaults = Defaults(),
) -> tuple[tuple[Entry, ...], dict[str, tuple[str, ...]]]:
    """A workspace's stored words as entries (sets expanded now, from config and host)."""
    sets = known_sets(config, environ, defaults)
    return expand(words, sets, sets.why_empty)
