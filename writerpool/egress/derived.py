"""Sets derived from this host's package-manager configuration: the index and registry
URLs pip, uv and npm are configured with (a company's mirror is allowed as configured).

Only the host part of each URL is kept (user info, paths and queries are dropped: a URL
may carry a token). A tool configured with nothing yields an empty set, and an allowlist
naming an empty set is refused: the tools' built-in defaults are not guessed here.
"""

from __future__ import annotations

import configparser
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from writerpool.config.allow_entry import DERIVED_SETS, Entry, parse_entry
from writerpool.config.models import Config
from writerpool.egress.allowlist import expand
from writerpool.errors import WriterpoolError

MAX_CONFIG_BYTES = 256 * 1024
_PIP_KEYS = ("index-url", "extra-index-url")
_PIP_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
_UV_ENV = ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX")


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


def npm_urls(environ: Mapping[str, str]) -> list[str]:
    urls = [environ[k] for k in ("npm_config_registry", "NPM_CONFIG_REGISTRY") if environ.get(k)]
    home = Path(environ.get("HOME", "/nonexistent"))
    for path in (Path(environ.get("NPM_CONFIG_USERCONFIG", home / ".npmrc")),):
        text = _read(path)
        for line in (text or "").splitlines():
            key, sep, value = line.partition("=")
            if sep and (key.strip() == "registry" or key.strip().endswith(":registry")):
                urls.append(value.strip())
    return urls


def derived_sets(environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, ...]]:
    """`host-pip`, `host-uv`, `host-npm`: each tool's configured hosts, in order."""
    env = os.environ if environ is None else environ
    found = {
        "host-pip": pip_urls(env),
        "host-uv": uv_urls(env),
        "host-npm": npm_urls(env),
    }
    assert tuple(found) == DERIVED_SETS
    return {
        name: tuple(dict.fromkeys(e for e in map(url_entry, urls) if e is not None))
        for name, urls in found.items()
    }


def known_sets(
    config: Config, environ: Mapping[str, str] | None = None
) -> dict[str, tuple[str, ...]]:
    """Every set an allowlist may name: the config's and the derived ones."""
    sets = derived_sets(environ)
    sets.update({name: s.hosts for name, s in config.egress.sets.items()})
    return sets


def resolve_allowlist(
    config: Config, words: tuple[str, ...], environ: Mapping[str, str] | None = None
) -> tuple[tuple[Entry, ...], dict[str, tuple[str, ...]]]:
    """A workspace's stored words as entries (sets expanded now, from config and host)."""
    return expand(words, known_sets(config, environ))
