"""`writerpool egress check` answers what the allowlist proxy would do: the name decided
first (no lookup for an unlisted one), then resolved the proxy's way (the same function,
here with a resolver that records its questions), every answer judged; a refusal names
the address and the `--allow` entry that would admit it, and a name that does not
resolve is said to be unresolved, never allowed."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from writerpool.config.models import parse_config
from writerpool.config.modes import ContainerSettings, ModeEntry, store_entry
from writerpool.config.paths import Paths
from writerpool.pool.modes.egress_view import check

CONFIG = b"""
[workspaces]
demo = "/srv/demo"

[egress.resolve]
"mapped.corp.test" = ["10.9.8.7"]
"""
ALLOW = ("dns.corp.test", "public.corp.test", "gone.corp.test", "mapped.corp.test",
         "192.0.2.0/24")  # fmt: skip
ANSWERS = {"dns.corp.test": ["10.1.1.1", "fd00::1"], "public.corp.test": ["10.1.1.2", "192.0.2.9"]}


class Resolver:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in ANSWERS:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ANSWERS[host]


@pytest.fixture
def paths() -> Paths:
    paths = Paths.from_env()
    settings = ContainerSettings(profiles=("code",), base="main", allow=ALLOW)
    store_entry(paths, "demo", ModeEntry(mode="container", container=settings))
    return paths


def finding(paths: Paths, target: str, resolver: Resolver) -> dict[str, Any]:
    report = check(parse_config(CONFIG), paths, "demo", target, lookup=resolver)
    [only] = report.findings
    return {"code": only.code, "status": only.status, "message": only.message,
            "remedy": only.remedy, **only.data}  # fmt: skip


def test_egress_check_resolves_as_the_proxy_does_and_names_the_entry_to_add(
    paths: Paths,
) -> None:
    resolver = Resolver()
    unlisted = finding(paths, "unlisted.corp.test", resolver)
    assert (unlisted["code"], unlisted["reason"], unlisted["admit"]) == (
        "egress_check_denied", "not_listed", "unlisted.corp.test"
    )  # fmt: skip
    port = finding(paths, "dns.corp.test:8443", resolver)
    assert (port["reason"], port["admit"]) == ("port_not_listed", "dns.corp.test:8443")
    assert resolver.asked == []  # names are decided before any lookup
    private = finding(paths, "dns.corp.test", resolver)
    assert (private["code"], private["reason"], private["address"]) == (
        "egress_check_denied", "address_private", "10.1.1.1"
    )  # fmt: skip
    assert private["admit"] == "10.1.1.1/32" and "add 10.1.1.1/32" in private["remedy"]
    assert "fd00::1 refused: address_private" in private["message"]
    allowed = finding(paths, "public.corp.test", resolver)
    assert (allowed["code"], allowed["entry"]) == ("egress_check_allowed", "public.corp.test")
    assert allowed["message"].endswith("the proxy connects to 192.0.2.9")
    gone = finding(paths, "gone.corp.test", resolver)
    assert (gone["code"], gone["status"], gone["reason"]) == (
        "egress_check_unresolved", "error", "resolve_failed"
    )  # fmt: skip
    assert "does not resolve on this host (Name or service not known)" in gone["message"]
    mapped = finding(paths, "mapped.corp.test", resolver)
    assert (mapped["reason"], mapped["address"]) == ("address_private", "10.9.8.7")
    assert "[egress.resolve]" in mapped["message"]
    assert resolver.asked == ["dns.corp.test", "public.corp.test", "gone.corp.test"]
