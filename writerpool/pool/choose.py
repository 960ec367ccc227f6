"""Which writer a session start takes: known verdicts first, the others judged side by side.

A start tries the writers whose current verdict (pool/verdicts.py) is clean first, one
after the other (no inspection: only readiness and the fence), and does not try those
whose current verdict refuses them. Writers not judged since their last lease are then
judged at once, each in its own thread under its own lease, at most JUDGES at a time:
the first to pass is taken, and the start returns without waiting for the others. A
judgement still running goes on, records its verdict and frees its writer, so later
starts know that writer without inspecting it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
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

JUDGES = 4  # inspections one start runs at once (each is a throwaway container)


@dataclass
class Trial:
    """One writer tried: its lease and state when it passed, else why not."""

    name: str
    lease: Lease | None = None
    state: WriterState | None = None
    refusal: str | None = None


def candidates(
    paths: Paths, alias: str, writers: int, refusals: list[str]
) -> tuple[list[str], list[str]]:
    """(writers known clean, writers not judged since their last lease), in index order.
    A writer whose current verdict refuses it is only named in `refusals`: nothing has
    leased it since, so it is as it was judged. Bounded by the workspace's writer count."""
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
    return clean, unknown


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


class _SideBySide:
    """Judges writers in threads; hands the first that passes to the one waiting start."""

    def __init__(self, run: Callable[[str], Trial]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._taken = False
        self._slots = threading.BoundedSemaphore(JUDGES)
        self._done: queue.Queue[Trial] = queue.Queue()

    def _body(self, name: str) -> None:
        got = Trial(name, refusal="writer_inspect_failed")  # unless judged below
        try:
            got = self._judged(name)
        finally:
            self._done.put(got)  # the waiting start counts every writer, whatever happened

    def _judged(self, name: str) -> Trial:
        with self._slots:
            with self._lock:
                if self._taken:  # another writer was taken: this one is not judged now
                    return Trial(name, refusal=None)
            got = self._run(name)
        with self._lock:
            handed = got.lease is not None and not self._taken
            self._taken = self._taken or handed
        if got.lease is not None and not handed:
            got.lease.release()  # judged clean (and recorded so), but not needed now
            return Trial(name, refusal=None)
        return got

    def first(self, names: list[str], refusals: list[str]) -> Trial | None:
        """The first writer of `names` that passes, or None when none does. Bounded by
        len(names) threads; the call returns as soon as one passes."""
        for name in names:
            threading.Thread(target=self._body, args=(name,), daemon=True).start()
        for _ in names:
            got = self._done.get()
            if got.lease is not None:
                return got
            if got.refusal is not None:
                refusals.append(f"{got.name} {got.refusal}")
        return None


def choose(
    paths: Paths, podman: Podman, config: Config, alias: str, writers: int, wanted: str,
    refusals: list[str],
) -> Trial | None:  # fmt: skip
    """The writer a start takes, leased and judged (its clone may change from now on),
    or None with every writer's reason in `refusals`."""
    clean, unknown = candidates(paths, alias, writers, refusals)
    chosen = None
    for name in clean:
        got = trial(paths, podman, config, name, wanted)
        if got.lease is not None:
            chosen = got
            break
        if got.refusal is not None:
            refusals.append(f"{name} {got.refusal}")
    if chosen is None and unknown:
        chosen = _SideBySide(lambda n: trial(paths, podman, config, n, wanted)).first(
            unknown, refusals
        )
    if chosen is not None:
        advance(paths.writer_dir(chosen.name))  # a session will change the clone
    return chosen
