"""Which writer a session start takes: known verdicts first, writers being judged last.

A start tries the writers whose current verdict (pool/verdicts.py) is clean first (no
inspection: only readiness and the fence), does not try those whose current verdict
refuses them, and judges the others in index order, the ones a background judgement is
already looking at last. Each writer is judged under its own lease, one at a time, so
concurrent starts spread over the writers as before.

After a session, the server judges its writer in the background without taking the
lease (`judge_unleased`, as `writer status` does): the verdict records the lease count
read before the writer was seen free, so any session or command that leases the writer
meanwhile makes it stale. The next start then knows the writer without inspecting it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from dataclasses import dataclass

from writerpool.config.models import Config
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.admission import LEASABLE, admit
from writerpool.pool.fence import fence
from writerpool.pool.lease import Lease
from writerpool.pool.provision import writer_name
from writerpool.pool.verdicts import Verdict, advance, current, lease_count, remember
from writerpool.runtime.podman import Podman
from writerpool.state.writer import WriterState, load_state

log = logging.getLogger(__name__)

@dataclass
class Trial:
    """One writer tried: its lease and state when it passed, else why not."""

    name: str
    lease: Lease | None = None
    state: WriterState | None = None
    refusal: str | None = None


def candidates(
    paths: Paths, alias: str, writers: int, refusals: list[str], later: Collection[str] = ()
) -> tuple[list[str], list[str]]:
    """(writers known clean, writers not judged since their last lease), in index order,
    those in `later` (being judged in the background) last. A writer whose current verdict
    refuses it is only named in `refusals`: nothing has leased it since, so it is as it
    was judged. Bounded by the workspace's writer count."""
    clean, unknown = [], []
    for index in range(1, writers + 1):
        name = writer_name(alias, index)
        wdir = paths.writer_dir(name)
        if not (wdir / "state.json").exists():
            continue
        known = current(wdir)
        if known is None:
            unknown.append(name)
        elif known.code == LEASABLE:
            clean.append(name)
        else:
            refusals.append(f"{name} {known.reason} ({known.code})")
    return clean, sorted(unknown, key=lambda n: n in later)


def _judge(paths: Paths, podman: Podman, config: Config, state: WriterState) -> str | None:
    """Why the writer cannot take a session now (None: it can); the lease is held. A
    current verdict stands in for the inspection; a verdict of the clone is recorded."""
    wdir = paths.writer_dir(state.name)
    count = lease_count(wdir)  # stable: the lease is held
    verdict = admit(paths, podman, config.pool, state, known=current(wdir))
    if verdict.readiness is None:
        remember(wdir, count, Verdict(verdict.code, verdict.reason, verdict.problems))
    if verdict.leasable:
        return None
    if verdict.problems:
        log.info("writer %s: %s", state.name, "; ".join(verdict.problems)[:500])
    return f"{verdict.reason} ({verdict.code})"


def trial(paths: Paths, podman: Podman, config: Config, name: str, wanted: str) -> Trial:
    """Lease the writer (without waiting) and judge it; the lease is kept only when it passes."""
    lease = Lease(paths.writer_dir(name))
    try:
        lease.acquire(wait=0, judging=True)
    except WriterpoolError as exc:
        return Trial(name, refusal=exc.code)  # busy with a session or a command
    try:
        state = load_state(paths.writer_dir(name))
        if state is None or state.base.name != wanted:
            lease.release()
            return Trial(name, refusal=None if state is None else f"is on base {state.base.name}")
        fence(podman, name, lease)
        refusal = _judge(paths, podman, config, state)
    except WriterpoolError as exc:
        refusal = exc.code
    except BaseException:
        lease.release()  # a bug: never leave the writer held by a forgotten lease
        raise
    if refusal is not None:
        log.info("writer %s not leased: %s", name, refusal)
        lease.release()
        return Trial(name, refusal=refusal)
    return Trial(name, lease, state)


def choose(
    paths: Paths, podman: Podman, config: Config, alias: str, writers: int, wanted: str,
    refusals: list[str], later: Collection[str] = (),
) -> Trial | None:  # fmt: skip
    """The writer a start takes, leased and judged (its clone may change from now on),
    or None with every writer's reason in `refusals`."""
    clean, unknown = candidates(paths, alias, writers, refusals, later)
    for name in clean + unknown:
        got = trial(paths, podman, config, name, wanted)
        if got.lease is not None:
            advance(paths.writer_dir(name))  # a session will change the clone
            return got
        if got.refusal is not None:
            refusals.append(f"{name} {got.refusal}")
    return None


def judge_unleased(paths: Paths, podman: Podman, config: Config, name: str) -> None:
    """Judge a writer nobody holds and record the verdict, without taking its lease (so
    no start finds it busy meanwhile). Nothing is recorded when it is held, not ready,
    or its clone cannot be inspected."""
    wdir = paths.writer_dir(name)
    count = lease_count(wdir)  # before the lease test: any later lease makes it stale
    probe = Lease(wdir)
    try:
        probe.acquire(wait=0, judging=True)
    except WriterpoolError:
        return
    probe.release()
    try:
        state = load_state(wdir)
        if state is None or current(wdir) is not None:
            return
        verdict = admit(paths, podman, config.pool, state)
    except WriterpoolError as exc:
        log.info("writer %s not judged after its session: %s", name, exc.code)
        return
    if verdict.readiness is None:
        remember(wdir, count, Verdict(verdict.code, verdict.reason, verdict.problems))


class AfterSessions:
    """Background judgements of writers whose sessions ended, one thread per writer at
    most (so bounded by the pool's writers); `busy()` names those still running."""

    def __init__(self, paths: Paths, config: Config) -> None:
        self._paths = paths
        self._config = config
        self._lock = threading.Lock()
        self._running: set[str] = set()

    def busy(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._running)

    def judge(self, name: str) -> None:
        with self._lock:
            if name in self._running:
                return
            self._running.add(name)
        threading.Thread(target=self._run, args=(name,), daemon=True).start()

    def _run(self, name: str) -> None:
        try:
            judge_unleased(self._paths, Podman(), self._config, name)
        finally:
            with self._lock:
                self._running.discard(name)
