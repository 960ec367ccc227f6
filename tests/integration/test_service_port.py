"""The pool service's port: `service start` never moves to another port while another
program holds the recorded one, and doctor says who holds it while the service is down.
A real squatter socket on loopback; the real service process."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.writers_support import codes, wp, write_workspaces
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.doctor.model import CheckContext
from writerpool.runtime.info import HostFacts
from writerpool.service.checks import service_port
from writerpool.state.service_record import recorded_port, running


@pytest.fixture
def configured(isolated_env: Path) -> Iterator[Paths]:
    write_workspaces({})
    try:
        yield Paths.from_env()
    finally:
        wp("service", "stop", check=True)


def _doctor_port_findings(paths: Paths) -> list[tuple[str, str, str]]:
    ctx = CheckContext(paths, HostFacts(os.getuid(), "me"), loaded=load_config(paths))
    return [(r.id, r.severity, r.message) for r in service_port(ctx)]


def test_a_taken_recorded_port_is_refused_with_its_holder_never_moved(configured: Paths) -> None:
    code, started = wp("service", "start")
    assert code == 0, started
    port = started["data"]["port"]
    code, stopped = wp("service", "stop")
    code, status = wp("service", "status")
    assert (code, codes(status)) == (1, ["service_stopped"]), "status fails while stopped"
    assert _doctor_port_findings(configured) == [], "a free port is not reported"

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen(1)
    try:
        code, refused = wp("service", "start")
        assert (code, codes(refused)) == (1, ["service_port_taken"]), refused
        [finding] = refused["findings"]
        assert finding["data"]["port"] == port
        assert finding["data"]["uids"] == [os.getuid()], "the holder's uid, from /proc/net/tcp"
        assert f"127.0.0.1:{port}" in finding["message"]
        assert "--port" in finding["remedy"]
        assert running(configured) is None, "nothing started elsewhere"
        assert recorded_port(configured) == port, "the recorded port stays"
        [(check, severity, message)] = _doctor_port_findings(configured)
        assert (check, severity) == ("service_port_taken", "warning")
        assert f"127.0.0.1:{port}" in message and f"uid {os.getuid()}" in message

        # The remedy: another port, chosen now and recorded.
        code, moved = wp("service", "start", "--port", "0")
        assert code == 0 and codes(moved) == ["service_running"], moved
        assert moved["data"]["port"] != port
        assert recorded_port(configured) == moved["data"]["port"]
        code, status = wp("service", "status")
        assert (code, codes(status)) == (0, ["service_running"])
    finally:
        squatter.close()
