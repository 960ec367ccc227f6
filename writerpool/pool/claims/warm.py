"""Warm writers: leased, at baseline, their container running and the agent started and
idle, with no provider access (no credential, no token, no proxy socket) until a
session claims one.

`WarmPool` is what the pool service hosts: `tick()` yields the writers an operator
command asked for and keeps each workspace's warm count started on each host; `claim()`
hands a session a warm writer after proving again what it was warmed on (warm_proof.py)
and audits the claim with that proof; a writer whose proof no longer holds is recycled,
never handed out. The launcher then grants the session's egress and model
(sessions/launch.py); the writer is warmed again once the guard admits it (at baseline).
A claim hands out what a cold start would: the agent persists nothing under /work.
Only an agent whose backend can warm (agent/backends.py) is warmed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from writerpool.agent.backends import remove_credentials, warm_backend_for
from writerpool.agent.seam import WarmAgent
from writerpool.audit import audit_warm, warm_line
from writerpool.config.models import LoadedConfig, Profile
from writerpool.config.modes import ExecutionModes, load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.claims.lease_ready import WriterSlot, lease_ready_writer
from writerpool.pool.claims.warm_counts import FILL_EVERY_SECONDS, Backoff, Place, wanted
from writerpool.pool.claims.warm_proof import (
    PI_ENDED,
    TOO_OLD,
    YIELD_ASKED,
    Proof,
    base_moved,
    prove,
    still,
)
from writerpool.pool.writer.lease import yield_asked
from writerpool.pool.writer.verdicts import advance
from writerpool.runtime.host import EngineFacts, WriterHost
from writerpool.runtime.hosts import WriterHosts, open_host

log = logging.getLogger(__name__)

READY_SECONDS = 90.0  # Podman's start and pi's, on a loaded host
CLOSE_SECONDS = 5.0
YIELD_POLL_SECONDS = 0.05


@dataclass
class WarmWriter:
    alias: str
    slot: WriterSlot
    agent: WarmAgent
    profile: Profile  # what pi was started with; a claim may change model and thinking
    image_id: str
    facts: EngineFacts  # the host's when the writer started
    proof: Proof  # what it was warmed on; a claim proves the same again (warm_proof.py)
    started: float  # by the pool's clock: recycled past [pool] warm_max_age_seconds

    @property
    def place(self) -> Place:
        return (self.alias, self.slot.host.name)


class WarmPool:
    """The warm writers of every workspace, held by this process. Thread-safe."""

    def __init__(
        self,
        paths: Paths,
        loaded: LoadedConfig,
        host: WriterHost | None = None,
        modes: ExecutionModes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._paths = paths
        self._clock = clock  # a warm writer's age
        self._loaded = loaded
        self._modes = modes if modes is not None else load_modes(paths)
        self._local = host or open_host()
        # Every host writers are placed on, each over SSH connected once and held while
        # its warm writers are: a claim's session makes its egress forward on it.
        self._hosts = WriterHosts(loaded.config.hosts, self._local)
        self._retired: list[WriterHosts] = []  # sets of [hosts] reloaded away
        self._warm: dict[str, WarmWriter] = {}  # by writer name
        self._lock = threading.Lock()
        self._warmed = threading.Condition(self._lock)  # notified when a warming ends
        self._warming: dict[str, int] = {}  # writers being warmed now, by workspace
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._egress_ahead: Callable[[], object] | None = None
        self._refresh: Callable[[], object] | None = None
        self._backoff = Backoff()

    def reload(self, loaded: LoadedConfig, modes: ExecutionModes) -> None:
        """New settings (validated by the caller): the next fill warms or retires
        writers to the new counts. Changed [hosts] tables: the warm writers on hosts
        over SSH are retired and the next ones connect as configured now."""
        if loaded.config.hosts != self._loaded.config.hosts:
            for name in self.warm_names():
                warm = self._warm.get(name)
                if warm is not None and warm.slot.host is not self._local:
                    self._retire(name, "its host's settings changed")
            self._retired.append(self._hosts)
            self._hosts = WriterHosts(loaded.config.hosts, self._local)
        self._loaded, self._modes = loaded, modes

    def start_egress_with(self, ahead: Callable[[], object]) -> None:
        """How to start the launcher's egress host ahead of the first claim (its fork
        server, egress.forks): a claim then skips that start and its imports too."""
        self._egress_ahead = ahead

    # -- what is warm ------------------------------------------------------------

    def wanted(self) -> dict[Place, int]:
        """Each workspace's warm count on each of its hosts (0 omitted), from the last
        valid modes."""
        return wanted(self._modes)

    def pid_of(self, name: str) -> int | None:
        """The warm writer's pi launcher process (None: not warm)."""
        with self._lock:
            warm = self._warm.get(name)
        return warm.agent.pid if warm is not None else None

    def warm_names(self, alias: str | None = None, host: str | None = None) -> list[str]:
        with self._lock:
            return sorted(n for n, w in self._warm.items()
                          if alias in (None, w.alias) and host in (None, w.place[1]))  # fmt: skip

    def ready_by_host(self, alias: str) -> dict[str, int]:
        """How many of `alias`'s writers are warm now on each host (0 omitted)."""
        counts: dict[str, int] = {}
        with self._lock:
            for warm in self._warm.values():  # bounded by the warm writers
                if warm.alias == alias:
                    counts[warm.place[1]] = counts.get(warm.place[1], 0) + 1
        return dict(sorted(counts.items()))

    # -- keeping them --------------------------------------------------------------

    def tick(self, fill: bool = True) -> None:
        """Yield what operators asked for, drop what died, and (with `fill`) start more."""
        self._yield_asked()
        if fill:
            self._recycle_stale()
            self.fill()

    def fill(self) -> list[str]:
        """Warm writers up to each place's count; returns the names warmed now.
        Bounded by the sum of the warm counts (each at most 16)."""
        started: list[str] = []
        counts = self.wanted()
        if self._egress_ahead is not None and counts:
            self._egress_ahead()  # before pi starts: its imports run beside a writer's pi
        with self._lock:
            held = {w.place for w in self._warm.values()}
        for place in held - set(counts):
            self._trim(place, 0)
        for place, count in sorted(counts.items()):
            self._trim(place, count)
            if not self._backoff.due(place):
                continue
            while len(self.warm_names(*place)) < count and not self._stopping.is_set():
                self._yield_asked()  # an operator waits no longer than one writer's start
                warm = self._warm_one(place)
                if warm is None:
                    self._backoff.failed(place)  # no other writer can be warmed now
                    break
                self._backoff.warmed(place)
                started.append(warm.slot.name)
        return started

    def wake(self) -> None:
        """A writer was released (a session ended): try every place at the next fill."""
        self._backoff.wake()

    def _trim(self, place: Place, count: int) -> None:
        for name in self.warm_names(*place)[count:]:
            self._retire(name, "surplus")

    def _profile(self, alias: str) -> Profile | None:
        entry = self._modes.workspaces.get(alias)
        if entry is None or entry.container is None:
            return None
        profiles = self._loaded.config.profiles
        named = [profiles[p] for p in entry.container.profiles if p in profiles]
        coding = (p for p in named if p.permission == "coding")
        return next((p for p in coding if warm_backend_for(p.agent) is not None), None)

    def _warm_one(self, place: Place) -> WarmWriter | None:
        """Lease a writer of the place the guard admits, prove it (warm_proof.py) and
        start pi in it without any credential."""
        alias, host = place
        profile = self._profile(alias)
        if profile is None:
            return None
        try:
            slot = lease_ready_writer(self._paths, self._loaded, alias, None,
                                      hosts=self._hosts, warming=True, on_host=host)  # fmt: skip
        except WriterpoolError as exc:
            # Said once per streak: a pool whose writers are all busy tries every round.
            level = logging.DEBUG if self._backoff.failing(place) else logging.INFO
            log.log(level, "workspace %s on %s: no writer warmed (%s)", alias, host, exc.code)
            return None
        facts = slot.host.facts()
        proof = prove(self._paths, self._loaded.config, slot, slot.spec.image_id, facts)
        if isinstance(proof, str):  # an operator command waits for it, or it went stale
            log.info("writer %s not warmed: %s", slot.name, proof)
            _let_go(self._paths, slot)
            return None
        slot.lease.mark_warm()
        with self._lock:
            self._warming[alias] = self._warming.get(alias, 0) + 1
        try:
            warm = self._start(alias, slot, profile, facts, proof)
        except BaseException:
            _let_go(self._paths, slot)
            raise
        else:
            with self._lock:
                self._warm[slot.name] = warm
            log.info("writer %s is warm", slot.name)
        finally:
            with self._lock:
                self._warming[alias] -= 1
                self._warmed.notify_all()
        return warm

    def wait_warming(self, alias: str, timeout: float) -> None:
        """Until no writer of `alias` is being warmed (a start that found every writer
        leased waits for the one the pool is starting, then claims it)."""
        with self._warmed:
            self._warmed.wait_for(lambda: not self._warming.get(alias), timeout)

    def _start(
        self, alias: str, slot: WriterSlot, profile: Profile, facts: EngineFacts, proof: Proof
    ) -> WarmWriter:
        config = self._loaded.config
        backend = warm_backend_for(profile.agent)
        assert backend is not None  # _profile picks only those
        # Rendered without any key: until a claim grants one, the agent has nothing to send.
        with slot.host.agent_dir(slot.writer) as agent_dir:
            remove_credentials(agent_dir)
            backend.render(config, agent_dir, profile.provider, True)
        argv, env = slot.agent_command(backend, profile)  # as a cold start does
        agent = backend.start(argv, env, None, READY_SECONDS)
        return WarmWriter(
            alias=alias, slot=slot, agent=agent, profile=profile, image_id=slot.spec.image_id,
            facts=facts, proof=proof, started=self._clock(),
        )  # fmt: skip

    def _yield_asked(self) -> None:
        """Bounded by the warm writers (at most 16 per workspace)."""
        for name in self.warm_names():
            with self._lock:
                warm = self._warm.get(name)
            if warm is None:
                continue
            if yield_asked(self._paths.writer_dir(name)):
                self._retire(name, YIELD_ASKED, recycled=True)
            elif not warm.agent.alive:
                self._retire(name, PI_ENDED, recycled=True)

    def _recycle_stale(self) -> None:
        """Recycle every warm writer whose proof no longer holds (its settings, image,
        control or verdict changed): file reads only, once per fill."""
        for name in self.warm_names():
            with self._lock:
                warm = self._warm.get(name)
            if warm is None:
                continue
            why = self._stale(warm)
            max_age = self._loaded.config.pool.warm_max_age_seconds
            if why is None and self._clock() - warm.started > max_age:
                why = TOO_OLD  # a fresh one is warmed in its place
            if why is not None:
                self._retire(name, why, recycled=True)

    def _retire(self, name: str, why: str, recycled: bool = False) -> None:
        """Stop the writer's pi and container and release its lease."""
        with self._lock:
            warm = self._warm.pop(name, None)
        if warm is not None:
            self._stop(warm, why, recycled)

    def _stop(self, warm: WarmWriter, why: str, recycled: bool = False) -> None:
        """`warm`, out of the pool: its pi and container stopped, its lease released.
        `recycled`: it may no longer take a session, `why` is the code audited."""
        log.info("writer %s is no longer warm: %s", warm.slot.name, why)
        if recycled:
            audit_warm(self._paths, warm_line("warm_recycle", why, warm.slot.name,
                                              host=warm.slot.host.name))  # fmt: skip
        try:
            warm.agent.close(CLOSE_SECONDS)
        finally:
            _let_go(self._paths, warm.slot)

    # -- claiming --------------------------------------------------------------------

    def claim(
        self, alias: str, base: str | None, profile: Profile, session: str | None = None
    ) -> WarmWriter | None:
        """A warm writer of `alias` on `base` (default: the workspace's) for a session of
        `profile`, taken out of the pool and proven again (warm_proof.py), its claim
        audited with what was proven; None when none is warm or still current (a stale
        one is recycled). Bounded by the workspace's warm writers."""
        for name in self.warm_names(alias):
            with self._lock:
                warm = self._warm.get(name)
                wanted = (profile.provider, profile.agent)
                if warm is None or (warm.profile.provider, warm.profile.agent) != wanted:
                    continue
                if base is not None and warm.slot.base_ref != base:
                    continue
                del self._warm[name]
            # The base is asked of git here only, not at each fill (every second, per
            # warm writer): what a claim hands out is what must be current.
            why = self._stale(warm) or base_moved(self._loaded, self._modes, alias, warm.slot)
            if why is not None:
                self._stop(warm, why, recycled=True)
                continue
            advance(self._paths.writer_dir(name))  # the session will change the clone
            audit_warm(self._paths, warm_line(
                "warm_claim", "writer_warm_claimed", name, session=session,
                host=warm.slot.host.name, verdict_digest=warm.proof.verdict_digest,
                fingerprint=warm.proof.fingerprint,
            ))  # fmt: skip
            return warm
        return None

    def give_way(self, alias: str) -> bool:
        """Stop one warm writer of `alias` and release it, for a cold start that found no
        other free writer (a session of another provider or base); False: none is warm."""
        names = self.warm_names(alias)
        if not names:
            return False
        self._retire(names[0], "a session that cannot claim it needs the writer")
        return True

    def _stale(self, warm: WarmWriter) -> str | None:
        """Why a warm writer may no longer take a session (None: it may): its pi ended,
        or the proof it was warmed on no longer holds. No Podman call: the running
        container is the image; the rest are file reads."""
        if not warm.agent.alive:
            return PI_ENDED
        made = prove(self._paths, self._loaded.config, warm.slot, warm.image_id, warm.facts)
        return still(made, warm.proof)

    # -- the service's thread ----------------------------------------------------------

    def start(self, refresh: Callable[[], object] | None = None) -> None:
        """Keep the pool in a thread of its own until close(). `refresh` runs before each
        fill: the service's settings check, so a changed warm count applies without
        waiting for a tool call."""
        self._refresh = refresh
        self._thread = threading.Thread(target=self._run, name="warm-pool", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_fill = 0.0
        while not self._stopping.wait(YIELD_POLL_SECONDS):
            due = time.monotonic() >= next_fill
            try:
                if due and self._refresh is not None:
                    self._refresh()
                self.tick(fill=due)
            except WriterpoolError as exc:
                log.warning("warm pool: %s", exc.code)
            except OSError as exc:  # a full disk, say: the next round tries again
                log.warning("warm pool: %s", exc.strerror)
            if due:
                next_fill = time.monotonic() + FILL_EVERY_SECONDS

    def close(self) -> None:
        """Stop the thread and every warm writer (their leases released)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(READY_SECONDS)
        for name in self.warm_names():
            self._retire(name, "the pool service stops")
        for hosts in [*self._retired, self._hosts]:  # bounded by the reloads of [hosts]
            hosts.close()


def _let_go(paths: Paths, slot: WriterSlot) -> None:
    """Release a writer the pool leased: its lease count advanced first (the next lease
    inspects the clone again: a pi ran beside it), its containers removed."""
    try:
        advance(paths.writer_dir(slot.name))
    finally:
        slot.release()
