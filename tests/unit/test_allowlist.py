"""The allowlist's entries, decisions, address judgements and derived sets (pure)."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from writerpool.config.allow_entry import parse_entry
from writerpool.config.models import Config, parse_config
from writerpool.egress.allowlist import Allowlist, address_refusal, expand
from writerpool.egress.connect_model import refusal_head
from writerpool.egress.derived import Defaults, derived_sets, resolve_allowlist, url_entry
from writerpool.errors import WriterpoolError
from writerpool.pool.writer.fence import remove_stale_egress


def allow(*words: str, sets: dict[str, tuple[str, ...]] | None = None) -> Allowlist:
    return Allowlist(expand(words, sets or {})[0])


@pytest.mark.parametrize(
    ("word", "text", "port", "scheme"),
    [
        ("Mirror.Example.test", "mirror.example.test", 443, "https"),
        ("mirror.example.test:8443", "mirror.example.test:8443", 8443, "https"),
        ("*.example.test", "*.example.test", 443, "https"),
        ("http://plain.example.test", "http://plain.example.test", 80, "http"),
        ("http://plain.example.test:8080/", "http://plain.example.test:8080", 8080, "http"),
        ("10.1.0.0/16", "10.1.0.0/16", 443, "https"),
        ("192.0.2.7", "192.0.2.7/32", 443, "https"),
        ("[fd00::/8]:8443", "[fd00::/8]:8443", 8443, "https"),
    ],
)
def test_entries_parse_to_one_canonical_spelling(
    word: str, text: str, port: int, scheme: str
) -> None:
    entry = parse_entry(word)
    assert (entry.text, entry.port, entry.scheme) == (text, port, scheme)


@pytest.mark.parametrize(
    "word",
    ["", "localhost", "https://x.example.test", "ftp://x.example.test", "user@x.example.test",
     "x.example.test:0", "x.example.test:99999", "x.example.test:https", "10.1.0.1/16",
     "http://10.0.0.0/8", "-x.example.test", "x_y.example.test", "*.*.example.test",
     "x.example.test/path"],
)  # fmt: skip
def test_bad_entries_are_refused_with_a_stable_code(word: str) -> None:
    with pytest.raises(WriterpoolError) as caught:
        expand((word,), {"pypi-mirror": ("mirror.example.test",)})
    assert caught.value.code in {"allow_entry_invalid", "allow_set_unknown"}


def test_decisions_name_the_entry_and_the_reason() -> None:
    listed = allow("mirror.example.test", "*.cdn.example.test:8443", "http://plain.example.test")
    assert listed.decide("MIRROR.example.test.", 443).entry == "mirror.example.test"
    assert listed.decide("mirror.example.test", 80).reason == "port_not_listed"
    assert listed.decide("mirror.example.test", 80, "http").reason == "scheme_not_listed"
    assert listed.decide("a.cdn.example.test", 8443).entry == "*.cdn.example.test:8443"
    assert listed.decide("cdn.example.test", 8443).reason == "not_listed"
    assert listed.decide("evil-mirror.example.test", 443).reason == "not_listed"
    assert listed.decide("plain.example.test", 80, "http").allowed
    assert listed.decide("plain.example.test", 443).reason == "scheme_not_listed"
    assert listed.decide("a b", 443).reason == "name_invalid"
    assert listed.decide("10.0.0.1", 443).reason == "not_listed"


def test_a_range_entry_admits_literal_addresses_and_private_answers() -> None:
    listed = allow("10.1.0.0/16", "mirror.example.test")
    assert listed.decide("10.1.2.3", 443).entry == "10.1.0.0/16"
    assert listed.decide("10.1.2.3", 80).reason == "port_not_listed"
    assert listed.decide("10.2.0.1", 443).reason == "not_listed"
    assert address_refusal(ipaddress.ip_address("10.1.9.9"), listed.ranges) is None
    assert address_refusal(ipaddress.ip_address("10.2.9.9"), listed.ranges) == "address_private"
    assert address_refusal(ipaddress.ip_address("64:ff9b::a01:909"), listed.ranges) is None


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "address_loopback"),
        ("127.8.9.10", "address_loopback"),
        ("::1", "address_loopback"),
        ("::ffff:127.0.0.1", "address_loopback"),
        ("10.0.0.1", "address_private"),
        ("192.168.1.1", "address_private"),
        ("fd12::1", "address_private"),
        ("169.254.169.254", "address_metadata"),
        ("169.254.1.1", "address_link_local"),
        ("fe80::1", "address_link_local"),
        ("100.64.0.1", "address_shared"),
        ("224.0.0.1", "address_multicast"),
        ("0.0.0.0", "address_private"),
        ("192.0.2.1", "address_private"),
        ("198.51.100.1", "address_private"),
        ("240.0.0.1", "address_private"),
        ("8.8.8.8", None),
        ("2001:4860::1", None),
        # IPv6 forms of an IPv4 address are judged as that address.
        ("64:ff9b::7f00:1", "address_loopback"),
        ("64:ff9b::a9fe:a9fe", "address_metadata"),
        ("64:ff9b::a00:1", "address_private"),
        ("64:ff9b::808:808", None),
        ("64:ff9b:1::a00:1", "address_reserved"),
        ("::127.0.0.1", "address_loopback"),
        ("::10.0.0.1", "address_private"),
        ("::", "address_private"),
        ("::ffff:0:7f00:1", "address_loopback"),
        ("::ffff:0:a9fe:a9fe", "address_metadata"),
        ("2002:7f00:1::", "address_loopback"),
        ("2002:a9fe:a9fe::", "address_metadata"),
        ("2002:a00:1::1", "address_private"),
        ("2002:808:808::1", None),
        ("fec0::1", "address_private"),
    ],
)
def test_addresses_are_judged_after_resolution(address: str, reason: str | None) -> None:
    assert address_refusal(ipaddress.ip_address(address), ()) == reason


def test_sets_expand_in_order_without_repeats_and_unknown_or_empty_sets_are_refused() -> None:
    sets = {"corp": ("mirror.example.test", "npm.example.test"), "host-npm": ()}
    entries, origin = expand(("mirror.example.test", "corp"), sets)
    assert [e.text for e in entries] == ["mirror.example.test", "npm.example.test"]
    assert origin["npm.example.test"] == ("corp",)
    with pytest.raises(WriterpoolError) as unknown:
        expand(("nosuchset",), sets)
    assert unknown.value.code == "allow_set_unknown"
    with pytest.raises(WriterpoolError) as empty:
        expand(("host-npm",), sets)
    assert empty.value.code == "allow_set_empty"
    with pytest.raises(WriterpoolError) as many:
        expand(tuple(f"h{i}.example.test" for i in range(65)), {})
    assert many.value.code == "allow_too_many"


class Asked:
    """Tool defaults that record being asked and know nothing."""

    def __init__(self) -> None:
        self.tools: list[str] = []

    def pip(self) -> list[str]:
        self.tools.append("pip")
        return []

    def npm(self, environ: Mapping[str, str]) -> list[str]:
        self.tools.append("npm")
        return []


def test_sets_derive_from_the_hosts_pip_uv_and_npm_configuration(tmp_path: Path) -> None:
    (tmp_path / ".config" / "pip").mkdir(parents=True)
    (tmp_path / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nindex-url = https://user:token@pypi.corp.test/simple\n"
        "extra-index-url = http://extra.corp.test:8080/simple https://pypi.corp.test/x\n"
    )
    (tmp_path / ".config" / "uv").mkdir()
    (tmp_path / ".config" / "uv" / "uv.toml").write_text(
        '[[index]]\nname = "corp"\nurl = "https://uv.corp.test:8443/simple"\n'
    )
    (tmp_path / ".npmrc").write_text(
        "registry=https://npm.corp.test/\n@scope:registry=https://scoped.corp.test\n"
    )
    asked = Asked()
    defaults = Defaults(pip=asked.pip, npm=asked.npm)
    sets = derived_sets({"HOME": str(tmp_path)}, defaults)
    assert sets["host-pip"].hosts == ("pypi.corp.test", "http://extra.corp.test:8080")
    assert sets["host-uv"].hosts == ("uv.corp.test:8443",)
    assert sets["host-npm"].hosts == ("npm.corp.test", "scoped.corp.test")
    assert all("configuration" in s.source for s in sets.values())
    assert asked.tools == []  # configured tools are not asked for their defaults
    assert url_entry("file:///srv/wheels") is None


def test_an_unconfigured_tool_gives_its_own_default_index_and_files_host(tmp_path: Path) -> None:
    """pip's and uv's defaults come from pip's model of its default index at run time
    (compared here with that model, never with a name written down)."""
    # pip's model is the pip of this interpreter; a venv made without pip has none.
    PyPI = pytest.importorskip("pip._internal.models.index").PyPI

    empty = {"HOME": str(tmp_path / "empty"), "PATH": ""}
    sets = derived_sets(empty)
    expected = (urlsplit(PyPI.url).hostname, PyPI.file_storage_domain)
    assert sets["host-pip"].hosts == sets["host-uv"].hosts == expected
    assert "default index and its files host" in sets["host-pip"].source
    assert sets["host-npm"].hosts == ()  # no npm on this PATH, none configured
    entries, origin = resolve_allowlist(Config(), ("host-pip",), empty)
    assert [e.text for e in entries] == list(expected)
    assert origin[str(expected[0])] == ("host-pip",)
    with pytest.raises(WriterpoolError) as empty_npm:
        resolve_allowlist(Config(), ("host-npm",), empty)
    assert empty_npm.value.code == "allow_set_empty"
    assert "install npm, or list your registry's host" in empty_npm.value.message
    no_pip = Defaults(pip=list, npm=lambda env: [])
    with pytest.raises(WriterpoolError) as empty_pip:
        resolve_allowlist(Config(), ("host-uv",), empty, no_pip)
    assert "list your index's host instead" in empty_pip.value.message


@pytest.mark.skipif(shutil.which("npm") is None, reason="no npm command")
def test_npm_is_asked_for_its_registry_when_none_is_configured(tmp_path: Path) -> None:
    """Configured globally (a file writerpool does not read itself), npm reports its
    registry; a ~/.npmrc registry is taken as written, without asking npm."""
    (tmp_path / "global").write_text("registry=https://npm.global.test/\n")
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"],
           "npm_config_globalconfig": str(tmp_path / "global")}  # fmt: skip
    asked = derived_sets(env)["host-npm"]
    assert asked.hosts == ("npm.global.test",) and "as npm reports it" in asked.source
    (tmp_path / "home").mkdir(exist_ok=True)  # npm may have made it
    (tmp_path / "home" / ".npmrc").write_text("@corp:registry=https://scoped.corp.test/\n")
    scoped = derived_sets(env)["host-npm"]
    assert scoped.hosts == ("npm.global.test", "scoped.corp.test")
    (tmp_path / "home" / ".npmrc").write_text("registry=https://npm.user.test/\n")
    recorded = Asked()
    configured = derived_sets(env, Defaults(npm=recorded.npm))
    assert configured["host-npm"].hosts == ("npm.user.test",) and recorded.tools == []


def test_config_sets_are_validated_and_combine_with_derived_ones(tmp_path: Path) -> None:
    config = parse_config(
        b'[egress.sets.corp]\nhosts = ["mirror.corp.test", "*.cdn.corp.test"]\n'
        b'[egress.resolve]\n"mirror.corp.test" = ["192.0.2.10"]\n'
    )
    entries, origin = resolve_allowlist(config, ("corp",), {"HOME": str(tmp_path)})
    assert [e.text for e in entries] == ["mirror.corp.test", "*.cdn.corp.test"]
    assert origin["*.cdn.corp.test"] == ("corp",)
    for bad in (b'[egress.sets.corp]\nhosts = ["localhost"]\n',
                b'[egress.sets.host-pip]\nhosts = ["a.corp.test"]\n',
                b'[egress.resolve]\n"a.corp.test" = ["not-an-address"]\n'):  # fmt: skip
        with pytest.raises(WriterpoolError) as caught:
            parse_config(bad)
        assert caught.value.code == "config_invalid"
    assert Config().egress.sets == {}


def test_a_refusal_names_the_host_in_its_status_line_and_body() -> None:
    answer = refusal_head(403, "evil.example.test:443", "not_listed").decode()
    status, _, rest = answer.partition("\r\n")
    assert status == "HTTP/1.1 403 writerpool: evil.example.test:443 is not allowed (not_listed)"
    body = rest.partition("\r\n\r\n")[2]
    assert "evil.example.test:443 is not allowed" in body
    assert f"Content-Length: {len(body)}" in rest


def test_the_fence_removes_both_proxy_sockets_and_nothing_else(tmp_path: Path) -> None:
    egress = tmp_path / "egress"
    egress.mkdir()
    for name in ("proxy.sock", "connect.sock"):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(egress / name))  # left behind, as by a killed server
    (egress / "ca.pem").write_text("certificates\n")
    remove_stale_egress(egress)
    assert sorted(p.name for p in egress.iterdir()) == ["ca.pem"]
    (egress / "connect.sock").write_text("not a socket\n")
    remove_stale_egress(egress)
    assert (egress / "connect.sock").read_text() == "not a socket\n"
