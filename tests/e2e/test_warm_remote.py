"""Warm writers on every host (pool/claims/warm.py): a workspace with writers on this
machine and on the test host (a second Podman host over SSH) keeps the count given for
the test host warm there, shows it per host, and a claim runs a coding session on the
remote warm pi, its egress forward made at the claim."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import KEY_ENV
from tests.e2e.pool_support import POOL_SCRIPT, make_pool, result_value
from tests.integration.writers_support import wp
from tests.support.testhost import add_host
from writerpool.agent.scripted import ScriptedProvider
from writerpool.config.hosts import HostConfig
from writerpool.config.models import load_config
from writerpool.pool.claims.warm import WarmPool
from writerpool.runtime.host import writer_at
from writerpool.runtime.remote import connect as connect_host
from writerpool.runtime.spec import LABEL_WRITER
from writerpool.sessions.launch import Launcher
from writerpool.sessions.placement import SessionPlan

pytestmark = [
    pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi, pytest.mark.remote,
]  # fmt: skip

COMMIT_PROMPT = "commit-work: the feature is called kite-1618"


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(POOL_SCRIPT) as scripted:
        yield scripted


def test_a_writer_on_the_test_host_is_kept_warm_there_and_a_claim_runs_a_session_on_it(
    tmp_path: Path,
    provider: ScriptedProvider,
    image_pin: Path,
    testhost: HostConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = make_pool(tmp_path, provider, "rwarm", writers=1)
    paths = pool.server.paths
    add_host(testhost, config=paths.config_file)
    wp("image", "transfer", "--host", "th", check=True)
    wp("control", "--host", "th", "--apply", check=True)
    # w1 stays on this machine, w2 is placed on th; only th keeps one warm.
    wp("mode", "set", pool.alias, "container", "--profiles", "code", "--writers", "2",
       "--hosts", "local,th", "--warm", "th=1", "--apply", check=True)  # fmt: skip
    monkeypatch.setenv(KEY_ENV, pool.key)
    loaded = load_config(paths)
    warm = WarmPool(paths, loaded)
    launcher = Launcher(paths, loaded, warm=warm)
    remote_writer = pool.writer(2)
    try:
        assert warm.fill() == [remote_writer]
        assert warm.ready_by_host(pool.alias) == {"th": 1}
        code, report = wp("writer", "status")
        assert report["data"]["warmByHost"] == {"th": 1}, report
        with connect_host("th", testhost) as remote:
            [running] = remote.containers(LABEL_WRITER, remote_writer)
            assert running.id
        warm_pi = warm.pid_of(remote_writer)
        plan = SessionPlan(
            workspace=pool.alias, workspace_dir=pool.checkout, profile_name="code",
            profile=loaded.config.profiles["code"], placement="container", read_only=False,
            base=None,
        )  # fmt: skip
        seen = provider.request_count
        launched = launcher.launch(plan, "s-remote-warm")
        assert (launched.writer, launched.warm) == (remote_writer, True)
        assert getattr(launched.agent, "pid", None) == warm_pi  # claimed, not started cold
        turn = launched.agent.prompt(COMMIT_PROMPT)
        done = launched.agent.wait(turn, 300)
        assert done.status == "completed", done
        assert result_value(done.text or "", "commit")
        assert provider.request_count > seen  # through the forward made at the claim
        launcher.stop(launched, 10.0)
        lines = [json.loads(line) for line in paths.audit_log.read_text().splitlines()]
        [claim] = [line for line in lines if line["action"] == "warm_claim"]
        assert (claim["writer"], claim["host"], claim["session"]) == (
            remote_writer, "th", "s-remote-warm"
        )  # fmt: skip
    finally:
        warm.close()
        launcher.shutdown()
        with connect_host("th", testhost) as remote:
            remote.remove_storage(writer_at(paths, remote_writer, remote.name))
