"""The pool service's pure parts: which Host and Origin values are loopback, client
tokens (shown once, stored as digests, 0600, revocable), and the settings watch."""

from __future__ import annotations

import stat

import pytest

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.service.guard import host_is_loopback, origin_is_loopback
from writerpool.sessions.reload import SettingsWatch
from writerpool.state import tokens


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:8123", "localhost:8123", "[::1]:8123", "LOCALHOST:1"]
)
def test_loopback_hosts_pass(host: str) -> None:
    assert host_is_loopback(host)


@pytest.mark.parametrize(
    "host",
    ["rebind.test:8123", "127.0.0.1.rebind.test", "127.0.0.2:80", "localhost.test",
     "user@127.0.0.1", "127.0.0.1:port", "", "[::2]:1", "0.0.0.0:8123"],
)  # fmt: skip
def test_other_hosts_are_refused(host: str) -> None:
    assert not host_is_loopback(host)


def test_only_loopback_http_origins_pass() -> None:
    assert origin_is_loopback("http://127.0.0.1:8123")
    assert origin_is_loopback("http://localhost")
    for origin in ("http://evil.test", "null", "file://", "http://127.0.0.1.evil.test",
                   "ws://127.0.0.1:1", "http://localhost:1/path"):  # fmt: skip
        assert not origin_is_loopback(origin), origin


def test_a_token_is_stored_as_a_digest_in_a_private_file_and_revoked(tmp_path: object) -> None:
    paths = Paths.from_env()
    token = tokens.create(paths, "alpha")
    other = tokens.create(paths, "beta")
    stored = tokens.tokens_file(paths).read_text()
    assert token not in stored and other not in stored
    assert stat.S_IMODE(tokens.tokens_file(paths).stat().st_mode) == 0o600
    clients = tokens.load(paths)
    assert tokens.client_of(clients, token) == "alpha"
    assert tokens.client_of(clients, other) == "beta"
    assert tokens.client_of(clients, token + "x") is None
    tokens.revoke(paths, "alpha")
    assert tokens.client_of(tokens.load(paths), token) is None
    with pytest.raises(WriterpoolError) as unknown:
        tokens.revoke(paths, "alpha")
    assert unknown.value.code == "service_client_unknown"
    # A new token replaces the old one.
    renewed = tokens.create(paths, "beta")
    assert tokens.client_of(tokens.load(paths), other) is None
    assert tokens.client_of(tokens.load(paths), renewed) == "beta"


@pytest.mark.parametrize("name", ["", "Alpha", "-x", "a b", "a" * 33, "../x"])
def test_bad_client_names_are_refused_and_nothing_is_written(name: str) -> None:
    paths = Paths.from_env()
    with pytest.raises(WriterpoolError) as refused:
        tokens.create(paths, name)
    assert refused.value.code == "usage_invalid"
    assert not tokens.tokens_file(paths).exists()


def test_a_corrupt_token_file_is_an_error_not_an_empty_list() -> None:
    paths = Paths.from_env()
    tokens.create(paths, "alpha")
    tokens.tokens_file(paths).write_text("{not json")
    with pytest.raises(WriterpoolError) as corrupt:
        tokens.load(paths)
    assert corrupt.value.code == "service_tokens_invalid"


CONFIG = """[workspaces]
demo = "{ws}"

[profiles.review]
permission = "read-only"
provider = "openai"
model = "m"
thinking = "off"
default = true
"""


def test_an_invalid_settings_change_is_refused_and_recorded_then_a_valid_one_loads(
    tmp_path: object,
) -> None:
    paths = Paths.from_env()
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(CONFIG.format(ws="/srv/one"))
    watch = SettingsWatch(paths)
    assert watch.changed() is None
    paths.config_file.write_text(CONFIG.format(ws="/srv/one") + "\nunknown_key = 1\n")
    now = watch.changed()
    assert now is not None
    assert watch.load(now) is None
    assert "config_invalid" in paths.settings_refused_file.read_text()
    assert watch.changed() is None  # the same bad change is not read again
    paths.config_file.write_text(CONFIG.format(ws="/srv/two-and-more"))
    now = watch.changed()
    assert now is not None
    fresh = watch.load(now)
    assert fresh is not None
    assert str(fresh[0].config.workspaces["demo"]) == "/srv/two-and-more"
    assert not paths.settings_refused_file.exists()
