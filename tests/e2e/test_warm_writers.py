"""Warm writers (pool/claims/warm.py) on real rootless Podman, pi started in them on the
scripted provider: no provider access while warm, a claim that runs a coding session,
a claim that leaves the clone exactly as a cold start does, a claim audited with the
verdict and fingerprint it proved while a stale fingerprint recycles the writer, a warm
writer yielded to an operator command without writer_busy, one recycled past its age,
and concurrent claims that never share a writer."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import KEY_ENV
from tests.e2e.pool_support import POOL_SCRIPT, PoolEnv, containers_of, make_pool, result_value
from tests.integration.writers_support import codes, git, podman, wp
from writerpool.agent.scripted import ScriptedProvider
from writerpool.config.models import LoadedConfig, load_config
from writerpool.config.modes import load_modes, store_entry
from writerpool.config.providers import PLACEHOLDER_KEY
from writerpool.pool.claims.admission import LEASABLE
from writerpool.pool.claims.warm import WarmPool, WarmWriter
from writerpool.pool.writer.container import EGRESS_PORT
from writerpool.pool.writer.inspect import Inspection
from writerpool.pool.writer.lease import read_holder
from writerpool.pool.writer.verdicts import current
from writerpool.runtime.image import parse_pin
from writerpool.sessions.launch import Launched, Launcher
from writerpool.sessions.placement import SessionPlan
from writerpool.state.writer import load_state

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git, pytest.mark.pi]

COMMIT_PROMPT = "commit-work: the feature is called ibis-3141"
# The script answers with text only (pi's transcript gets an assistant message).
QUIET_PROMPT = "nothing to change: just say hello"
# The script writes uncommitted.txt ("draft") and nothing else.
DIRTY_PROMPT = "leave-dirty: one draft file"
# From inside the writer, what pi would do: ask the provider through the forwarder.
ASK_PROVIDER = (
    "import urllib.request, sys\n"
    "try:\n"
    f"    urllib.request.urlopen('http://127.0.0.1:{EGRESS_PORT}/p/v1/models', timeout=10)\n"
    "except Exception as exc:\n"
    "    print(type(exc).__name__); sys.exit(3)\n"
    "print('reached')\n"
)


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedProvider]:
    with ScriptedProvider(POOL_SCRIPT) as scripted:
        yield scripted


def _warm_pool(
    tmp_path: Path,
    provider: ScriptedProvider,
    stem: str,
    monkeypatch: pytest.MonkeyPatch,
    writers: int = 1,
) -> tuple[PoolEnv, LoadedConfig, WarmPool]:
    pool = make_pool(tmp_path, provider, stem, writers=writers)
    wp("mode", "set", pool.alias, "container", "--profiles", "code", "--writers", str(writers),
       "--warm", "1", "--apply", check=True)  # fmt: skip
    monkeypatch.setenv(KEY_ENV, pool.key)  # the launcher reads the provider's key here
    loaded = load_config(pool.server.paths)
    return pool, loaded, WarmPool(pool.server.paths, loaded)


def _plan(pool: PoolEnv, loaded: LoadedConfig) -> SessionPlan:
    return SessionPlan(
        workspace=pool.alias, workspace_dir=pool.checkout, profile_name="code",
        profile=loaded.config.profiles["code"], placement="container", read_only=False,
        base=None,
    )  # fmt: skip


def _ask_provider(writer: str) -> str:
    """Run ASK_PROVIDER in the writer's running container; its output and exit status."""
    try:
        out = podman("exec", f"writerpool-{writer}", "python3", "-c", ASK_PROVIDER)
        return f"0 {out.strip()}"
    except Exception as exc:
        return f"failed {getattr(exc, 'stdout', '')!s}".strip()


def test_a_warm_writer_has_no_provider_access_and_a_claim_runs_a_coding_session(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, loaded, warm = _warm_pool(tmp_path, provider, "warm", monkeypatch)
    w1 = pool.writer(1)
    writer_dir = pool.server.paths.writer_dir(w1)
    launcher = Launcher(pool.server.paths, loaded, warm=warm)
    try:
        assert warm.fill() == [w1]
        assert containers_of(w1, running_only=True) == [f"writerpool-{w1}"]
        holder = read_holder(writer_dir)
        assert holder is not None and holder.warm
        # The operator sees it as warm, not busy, and counted.
        code, report = wp("writer", "status", w1)
        assert code == 0 and codes(report) == ["writer_warm"], report
        assert report["data"]["warm"] == 1 and report["data"]["writers"][0]["warm"] is True
        # Warm: no key, no token, no proxy socket; a request from inside goes nowhere.
        models = json.loads((writer_dir / "agent" / "models.json").read_text())
        assert models["providers"]["scripted"]["apiKey"] == PLACEHOLDER_KEY
        assert pool.key not in (writer_dir / "agent" / "models.json").read_text()
        assert [p.name for p in (writer_dir / "egress").iterdir() if p.is_socket()] == []
        seen = provider.request_count
        asked = _ask_provider(w1)
        assert asked.startswith("failed") and "reached" not in asked, asked
        assert provider.request_count == seen

        warm_pi = warm.pid_of(w1)
        launched = launcher.launch(_plan(pool, loaded), "s-warm-claim")
        assert launched.writer == w1
        assert getattr(launched.agent, "pid", None) == warm_pi  # claimed, not started cold
        assert warm.warm_names() == []  # claimed: out of the pool, the same pi
        turn = launched.agent.prompt(COMMIT_PROMPT)
        done = launched.agent.wait(turn, 300)
        assert done.status == "completed", done
        commit = result_value(done.text or "", "commit")
        assert provider.request_count > seen
        assert provider.last_model == "scripted-model"
        launcher.stop(launched, 10.0)
        assert git(pool.clone(1), "rev-parse", "pi-work") == commit
        assert containers_of(w1) == []
        # The writer holds work now: it is not warmed again until collect and reset.
        assert warm.fill() == []
        assert not read_holder(writer_dir)
    finally:
        warm.close()
        launcher.shutdown()
    assert containers_of(w1) == []


def _tree(root: Path) -> dict[str, str]:
    """Every path of a work tree (.git aside) as the host reads it, nothing followed:
    a file's content digest, a link's target, a directory, or a special file."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [name for name in dirnames if name != ".git"]
        for name in [*dirnames, *filenames]:
            path = here / name
            if path.is_symlink():
                seen = "link " + os.readlink(path)
            elif path.is_dir():
                seen = "directory"
            elif path.is_file():
                seen = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen = "special"
            found[str(path.relative_to(root))] = seen
    return found


def _status_by_content(seen: Inspection | str | None) -> dict[str, object]:
    """What the session's closing inspection (the one collect uses) saw of the clone,
    without what differs between two writers (WIP commits carry their time)."""
    assert isinstance(seen, Inspection), seen
    return {
        "head": (seen.head, seen.head_commit), "branches": seen.branches,
        "stash": seen.stash, "dirty": seen.dirty, "wip_tree": seen.wip_tree,
        "entries": seen.entries, "counts": seen.counts, "extra_refs": seen.extra_refs,
        "git_state": seen.git_state, "index_matches": seen.index_matches,
    }  # fmt: skip


def _session(launcher: Launcher, plan: SessionPlan, name: str, prompt: str) -> Launched:
    """One whole session: start, one prompt to its end, stop (the clone inspected)."""
    launched = launcher.launch(plan, name)
    try:
        turn = launched.agent.prompt(prompt)
        done = launched.agent.wait(turn, 300)
        assert done.status == "completed", done
    finally:
        launcher.stop(launched, 10.0)
    return launched


def test_a_warm_claim_leaves_the_clone_as_a_cold_start_does_and_the_writer_leasable(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, loaded, warm = _warm_pool(tmp_path, provider, "clean", monkeypatch, writers=2)
    plan = _plan(pool, loaded)
    cold = Launcher(pool.server.paths, loaded)  # never claims: every start is cold
    hot = Launcher(pool.server.paths, loaded, warm=warm)
    base = _tree(pool.checkout)
    try:
        # A warm session that changes nothing leaves the writer to the next session.
        [first] = warm.fill()
        quiet = _session(hot, plan, "s-quiet", QUIET_PROMPT)
        assert (quiet.warm, quiet.writer) == (True, first)
        assert _tree(pool.server.paths.writer_dir(first) / "clone") == base
        assert not _status_by_content(quiet.seen)["dirty"]
        verdict = current(pool.server.paths.writer_dir(first))
        assert verdict is not None and verdict.code == LEASABLE, verdict
        assert "writer_holds_work" not in codes(wp("writer", "status", first)[1])
        [warmed] = warm.fill()  # and the pool warms a writer again
        # The same scripted session, cold on the other writer, then on the warm one.
        cold_run = _session(cold, plan, "s-cold", DIRTY_PROMPT)
        warm_run = _session(hot, plan, "s-warm", DIRTY_PROMPT)
        assert (cold_run.warm, warm_run.warm, warm_run.writer) == (False, True, warmed)
        assert cold_run.writer != warm_run.writer
    finally:
        warm.close()
        hot.shutdown()
        cold.shutdown()
    trees = {
        run.writer: _tree(pool.server.paths.writer_dir(str(run.writer)) / "clone")
        for run in (cold_run, warm_run)
    }
    draft = hashlib.sha256(b"draft\n").hexdigest()
    # What the script did, and nothing else: no transcript, no agent state.
    assert trees[cold_run.writer] == {**base, "uncommitted.txt": draft}
    assert trees[warm_run.writer] == trees[cold_run.writer]
    assert _status_by_content(warm_run.seen) == _status_by_content(cold_run.seen)
    assert _status_by_content(cold_run.seen)["dirty"] is True


def test_a_warm_writer_yields_to_writer_collect_without_writer_busy(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, _, warm = _warm_pool(tmp_path, provider, "yield", monkeypatch)
    w1 = pool.writer(1)
    assert warm.fill() == [w1]
    warm.start()  # the service's thread: watches for operators, refills
    try:
        code, report = wp("writer", "collect", w1, "--apply")
        assert code == 0, report
        assert "writer_busy" not in codes(report)
        # Still at its baseline: the pool warms it again once the command is done.
        deadline = time.monotonic() + 120
        while warm.warm_names() != [w1] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert warm.warm_names() == [w1]
    finally:
        warm.close()
    assert containers_of(w1) == []
    assert read_holder(pool.server.paths.writer_dir(w1)) is None


def _audited(pool: PoolEnv, action: str) -> list[dict[str, object]]:
    log = pool.server.paths.audit_log
    found = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [line for line in found if line["action"] == action]


def test_a_claim_audits_what_it_proved_and_a_stale_fingerprint_recycles_the_warm_writer(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, loaded, warm = _warm_pool(tmp_path, provider, "proof", monkeypatch)
    w1, paths = pool.writer(1), pool.server.paths
    writer_dir, profile = paths.writer_dir(w1), loaded.config.profiles["code"]
    entry = load_modes(paths).workspaces[pool.alias]
    assert entry.container is not None
    # Settings that change the session's container: an allowlist for the workspace
    # (its proxy and variables); the fingerprint acceptance recorded no longer matches.
    allowing = entry.model_copy(update={"container": entry.container.model_copy(
        update={"allow": ("pkg.test:443",)})})  # fmt: skip
    try:
        assert warm.fill() == [w1]
        store_entry(paths, pool.alias, allowing)
        assert warm.claim(pool.alias, None, profile, "s-stale") is None
        assert warm.warm_names() == [] and containers_of(w1) == []
        assert read_holder(writer_dir) is None  # recycled: the lease is released
        [recycled] = _audited(pool, "warm_recycle")
        assert (recycled["writer"], recycled["outcome"]) == (w1, "writer_acceptance_stale")
        assert _audited(pool, "warm_claim") == []

        # The settings back: warmed again, and a claim proves and audits what it relied on.
        store_entry(paths, pool.alias, entry)
        assert warm.fill() == [w1]
        verdict, state = current(writer_dir), load_state(writer_dir)
        assert verdict is not None and verdict.code == LEASABLE and state is not None
        claimed = warm.claim(pool.alias, None, profile, "s-proof")
        assert claimed is not None and claimed.slot.name == w1
        [line] = _audited(pool, "warm_claim")
        assert (line["writer"], line["session"], line["outcome"], line["host"]) == (
            w1, "s-proof", "writer_warm_claimed", "local"
        )  # fmt: skip
        assert line["verdictDigest"] == verdict.digest
        assert line["fingerprint"] == state.fingerprint
        assert current(writer_dir) is None  # claimed: the clone may change now
        claimed.agent.close(5.0)
        claimed.slot.release()

        # A changed image pin: the next fill recycles the warm writer before any claim.
        assert warm.fill() == [w1]
        pinned = image_pin.read_bytes()
        other = parse_pin(pinned).model_copy(update={"image_id": "0" * 64})
        image_pin.write_bytes(other.to_bytes())
        warm.tick()
        assert warm.warm_names() == [] and containers_of(w1) == []
        assert [r["outcome"] for r in _audited(pool, "warm_recycle")] == [
            "writer_acceptance_stale", "warm_image_changed"
        ]  # fmt: skip
        image_pin.write_bytes(pinned)
    finally:
        warm.close()
    assert containers_of(w1) == []


def test_a_warm_writer_older_than_the_configured_age_is_recycled_and_warmed_afresh(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, loaded, _ = _warm_pool(tmp_path, provider, "aged", monkeypatch)
    w1, paths = pool.writer(1), pool.server.paths
    now = [1000.0]
    config = loaded.config
    aged = config.model_copy(update={"pool": config.pool.model_copy(
        update={"warm_max_age_seconds": 60.0})})  # fmt: skip
    warm = WarmPool(paths, LoadedConfig(aged, loaded.fingerprint), clock=lambda: now[0])
    try:
        assert warm.fill() == [w1]
        first = warm.pid_of(w1)
        now[0] += 59.0
        warm.tick()
        assert warm.pid_of(w1) == first  # not yet
        now[0] += 2.0
        warm.tick()  # recycled, then warmed afresh in the same fill
        assert warm.warm_names() == [w1] and warm.pid_of(w1) not in (None, first)
        assert [r["outcome"] for r in _audited(pool, "warm_recycle")] == ["warm_too_old"]
    finally:
        warm.close()
    assert containers_of(w1) == []


def test_a_warm_writer_of_a_base_that_moved_is_recycled_and_warmed_on_the_new_commit(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold start refreshes its writer to the base as it is now: a claim must not hand
    out the commit the writer was warmed on once the operator's branch moved."""
    pool, loaded, warm = _warm_pool(tmp_path, provider, "moved", monkeypatch)
    w1, profile = pool.writer(1), loaded.config.profiles["code"]
    try:
        assert warm.fill() == [w1]
        git(pool.checkout, "commit", "--allow-empty", "-q", "-m", "the base moves on")
        moved = git(pool.checkout, "rev-parse", "HEAD").strip()
        assert warm.claim(pool.alias, None, profile, "s-old") is None
        assert [r["outcome"] for r in _audited(pool, "warm_recycle")] == ["warm_base_moved"]
        assert warm.fill() == [w1]  # warmed again, on the base as it is now
        claimed = warm.claim(pool.alias, None, profile, "s-new")
        assert claimed is not None and claimed.slot.base_commit == moved
        claimed.agent.close(5.0)
        claimed.slot.release()
    finally:
        warm.close()
    assert containers_of(w1) == []


def test_concurrent_claims_never_take_the_same_warm_writer(
    tmp_path: Path, provider: ScriptedProvider, image_pin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = make_pool(tmp_path, provider, "rush", writers=2)
    wp("mode", "set", pool.alias, "container", "--profiles", "code", "--writers", "2",
       "--warm", "2", "--apply", check=True)  # fmt: skip
    loaded = load_config(pool.server.paths)
    warm = WarmPool(pool.server.paths, loaded)
    profile = loaded.config.profiles["code"]
    claimed: list[WarmWriter | None] = []
    gate = threading.Barrier(4)

    def claim(session: str) -> None:
        gate.wait()
        claimed.append(warm.claim(pool.alias, None, profile, session))

    try:
        assert sorted(warm.fill()) == [pool.writer(1), pool.writer(2)]
        threads = [threading.Thread(target=claim, args=(f"s-{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        taken = [c for c in claimed if c is not None]
        assert len(claimed) == 4 and claimed.count(None) == 2
        assert sorted(c.slot.name for c in taken) == [pool.writer(1), pool.writer(2)]
        # One audit line per claim, each its own session.
        sessions = [line["session"] for line in _audited(pool, "warm_claim")]
        assert len(set(sessions)) == len(sessions) == 2
    finally:
        for held in claimed:
            if held is not None:
                held.agent.close(5.0)
                held.slot.release()
        warm.close()
    assert containers_of(pool.writer(1)) == containers_of(pool.writer(2)) == []
