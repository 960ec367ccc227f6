"""Warm writers held by the pool service (`writerpool service run`) on real rootless
Podman and real pi: a start over HTTP (or through a relaying `serve`) claims the one the
service keeps warm, a warm writer yields to an operator's command in another process,
the warm count follows a settings change, and a killed service leaves no warm writer
behind."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from tests.e2e.harness import connect
from tests.e2e.pool_support import POOL_SCRIPT, PoolEnv, containers_of, make_pool, result_value
from tests.e2e.service_support import http_client, running_service
from tests.integration.writers_support import codes, git, podman, wp
from writerpool.agent.scripted import ScriptedProvider
from writerpool.pool.writer.lease import lease_taken, read_holder
from writerpool.state import tokens

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

COMMIT_PROMPT = "commit-work: the feature is called ibis-2718"
# A second coding profile whose provider is another name for the scripted one.
OTHER_PROVIDER = """
[profiles.other]
permission = "coding"
provider = "other"
model = "scripted-model"
thinking = "off"

[providers.other]
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "WRITERPOOL_TEST_SCRIPTED_KEY"
"""
# Podman's start and pi's, on a loaded 2-core host; a bound, not a measurement.
WARM_WITHIN = 180.0


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(POOL_SCRIPT) as scripted:
        yield scripted


def _warm_pool(tmp_path: Path, provider: ScriptedProvider, stem: str) -> PoolEnv:
    pool = make_pool(tmp_path, provider, stem, writers=1)
    _set_warm(pool, 1)
    return pool


def _set_warm(pool: PoolEnv, count: int) -> None:
    wp("mode", "set", pool.alias, "container", "--profiles", "code", "--writers", "1",
       "--warm", str(count), "--apply", check=True)  # fmt: skip


def _until(what: str, done: Callable[[], bool]) -> None:
    """Poll `done` until true; bounded by WARM_WITHIN."""
    deadline = time.monotonic() + WARM_WITHIN
    while not done():
        assert time.monotonic() < deadline, f"not within {WARM_WITHIN} s: {what}"
        time.sleep(0.25)


def _status(writer: str) -> list[str]:
    return codes(wp("writer", "status", writer)[1])


def _warm(writer: str) -> bool:
    """Held warm by the service, its container running."""
    return _status(writer) == ["writer_warm"] and bool(containers_of(writer, running_only=True))


def _container_id(writer: str) -> str:
    return podman("ps", "--filter", f"label=io.writerpool.writer={writer}",
                  "--format", "{{.ID}}").strip()  # fmt: skip


async def _start_and_close_through_serve(pool: PoolEnv) -> str:
    async with connect(pool.server) as client:
        started = await client.ok("pi_session_start", pool.start_args())
        await client.ok("pi_session_close", {"sessionId": started["session"]["sessionId"]})
        return str(started["session"]["writer"])


def test_a_start_over_http_claims_the_writer_the_service_keeps_warm(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = _warm_pool(tmp_path, provider, "svcwarm")
    w1 = pool.writer(1)
    token = tokens.create(pool.server.paths, "alpha")

    async def scenario(url: str) -> tuple[str, str]:
        async with http_client(url, token) as client:
            # The lease says warm as pi starts; capabilities count it once pi is idle.
            deadline = time.monotonic() + WARM_WITHIN
            while True:  # bounded by WARM_WITHIN
                caps = await client.ok("pi_capabilities_get")
                [ws] = [w for w in caps["workspaces"] if w["alias"] == pool.alias]
                if ws["warmReady"] or time.monotonic() > deadline:
                    break
                await anyio.sleep(0.25)
            assert (ws["warm"], ws["warmReady"]) == (1, 1)
            before = _container_id(w1)
            started = await client.ok("pi_session_start", pool.start_args())
            sid = started["session"]["sessionId"]
            assert started["session"]["writer"] == w1
            assert _container_id(w1) == before  # the warm container, not a new one
            turn = await client.ok(
                "pi_session_prompt", {"sessionId": sid, "message": COMMIT_PROMPT}
            )
            done = await client.wait_turn(sid, turn["turnId"], limit=300)
            assert done["status"] == "completed", done
            await client.ok("pi_session_close", {"sessionId": sid})
            return str(sid), result_value(done["text"] or "", "commit")

    with running_service(pool.server) as service:
        _until("the service warms the writer", lambda: _status(w1) == ["writer_warm"])
        code, report = wp("writer", "status", w1)
        assert report["data"]["warm"] == 1 and report["data"]["writers"][0]["warm"] is True
        holder = read_holder(pool.server.paths.writer_dir(w1))
        assert holder is not None and holder.warm and holder.pid == service.proc.pid
        seen = provider.request_count
        sid, commit = anyio.run(scenario, service.url)
        assert provider.request_count > seen  # the claimed pi reached the provider
        # The writer holds the session's work: it is not warmed again before collect.
        time.sleep(2.0)  # two of the pool's fill rounds; not a timing assertion
        assert "writer_warm" not in _status(w1)
        holder = read_holder(pool.server.paths.writer_dir(w1))
        assert holder is None or not holder.warm
    assert git(pool.clone(1), "rev-parse", "pi-work") == commit
    [start] = [line for line in pool.server.audit_lines() if line["action"] == "pi_session_start"]
    assert (start["session"], start["writer"], start["client"], start.get("warm")) == (
        sid,
        w1,
        "alpha",
        True,
    )
    assert read_holder(pool.server.paths.writer_dir(w1)) is None


def test_a_start_that_cannot_claim_the_warm_writer_makes_it_give_way(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    """The only writer is warm for the `code` profile's provider; a session of a profile
    with another provider cannot claim it, so the service stops it and the session
    starts cold in it (not writer_unavailable)."""
    pool = make_pool(tmp_path, provider, "svcgive", writers=1)
    with pool.server.paths.config_file.open("a") as config:
        config.write(OTHER_PROVIDER.format(port=provider.port))
    wp("mode", "set", pool.alias, "container", "--profiles", "code,other", "--writers", "1",
       "--warm", "1", "--apply", check=True)  # fmt: skip
    w1 = pool.writer(1)
    token = tokens.create(pool.server.paths, "alpha")

    async def scenario(url: str, warm_id: str) -> str:
        async with http_client(url, token) as client:
            args = {"workspace": pool.alias, "executionProfile": "other"}
            started = await client.ok("pi_session_start", args)
            assert started["session"]["writer"] == w1
            assert _container_id(w1) not in ("", warm_id)  # a cold start: a new container
            await client.ok("pi_session_close", {"sessionId": started["session"]["sessionId"]})
            return str(started["session"]["sessionId"])

    with running_service(pool.server) as service:
        _until("the service warms the writer", lambda: _warm(w1))
        sid = anyio.run(scenario, service.url, _container_id(w1))
    [start] = [a for a in pool.server.audit_lines() if a["action"] == "pi_session_start"]
    assert (start["session"], start["outcome"], start.get("warm")) == (sid, "ok", None)


def test_a_warm_writer_of_the_service_yields_to_commands_follows_settings_and_dies_with_it(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path
) -> None:
    pool = _warm_pool(tmp_path, provider, "svcyield")
    w1 = pool.writer(1)
    wdir = pool.server.paths.writer_dir(w1)
    with running_service(pool.server) as service:
        _until("the service warms the writer", lambda: _warm(w1))
        first = _container_id(w1)
        # An operator's command in a process of its own: the service yields, no busy.
        code, report = wp("writer", "collect", w1, "--apply")
        assert code == 0, report
        assert "writer_busy" not in codes(report)
        # Still at its baseline: the service warms it again, in a new container.
        _until("warm again after collect", lambda: _warm(w1))
        assert _container_id(w1) not in ("", first)
        # A settings change resizes the pool without a restart (no tool call needed).
        _set_warm(pool, 0)
        _until("retired at --warm 0", lambda: not lease_taken(wdir) and not containers_of(w1))
        assert "writer_warm" not in _status(w1)
        _set_warm(pool, 1)
        _until("warm at --warm 1", lambda: _warm(w1))
        # `serve` relays to the service: its client's session claims the warm writer.
        assert anyio.run(_start_and_close_through_serve, pool) == w1
        [start] = [a for a in pool.server.audit_lines() if a["action"] == "pi_session_start"]
        assert start.get("warm") is True and start["client"].startswith("serve-"), start
        _until("warm again after the relayed session", lambda: _warm(w1))
        # Killed: the warm pi ends with its stdin, its container with it, the lease drops.
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(10)
        _until("the killed service's writer stops", lambda: not containers_of(w1))
        assert not lease_taken(wdir)
    # The next service recovers: the writer is warmed again, and stopped with it.
    with running_service(pool.server) as service:
        _until("warm under the next service", lambda: _status(w1) == ["writer_warm"])
        holder = read_holder(wdir)
        assert holder is not None and holder.pid == service.proc.pid
    assert containers_of(w1) == []
    assert not lease_taken(wdir) and read_holder(wdir) is None
