"""Warm writers: leased, at baseline, their container running and pi started and idle,
with no provider access (no credential, no token, no proxy socket) until a session
claims one.

`WarmPool` is what the long-lived pool service hosts: `tick()` yields the writers an
operator command asked for and keeps up to each workspace's `warm` count started;
`claim()` hands a session a warm writer after checking that its settings, acceptance
and clone are still what they were when it was warmed. The session's launcher then
grants its egress and gives pi the session's model (sessions/launch.py); when the session
ends its lease is released like any other, and the writer is warmed again only once
the guard admits it again (at baseline: at once after a session that changed nothing,
else after finish or reset). A claim hands out what a cold start would: pi persists
nothing and keeps no state under /work (PiAgent.configure, agent/launch.py). Only an
agent whose backend can warm (agent/backends.py) is warmed; `mode set --warm` refuses
the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from writerpool.agent import launch as agent_launch
from writerpool.agent.backends import remove_credentials, warm_backend_for
from writerpool.agent.seam import WarmAgent
from writerpool.config.models import LoadedConfig, Profile
from writerpool.config.modes import ExecutionModes, load_modes
from writerpool.config.paths import Paths, WriterRecord
from writerpool.errors import WriterpoolError
from writerpool.pool.acceptance.accept import fingerprint_of, groups_given
from writerpool.pool.acceptance.control import control_current
from writerpool.pool.claims.admission import LEASABLE
from writerpool.pool.claims.lease_ready import WriterSlot, lease_ready_writer
from writerpool.pool.writer.container import AGENT_DIR
from writerpool.pool.writer.lease import yield_asked
from writerpool.pool.writer.verdicts import Verdict, advance, current, lease_count, remember
from writerpool.runtime.host import EngineFacts, WriterHost
from writerpool.runtime.hosts import open_host
from writerpool.runtime.image import load_pin

log = logging.getLogger(__name__)

READY_SECONDS = 90.0  # Podman's start and pi's, on a loaded host
CLOSE_SECONDS = 5.0
YIELD_POLL_SECONDS = 0.05
FILL_EVERY_SECONDS = 1.0
# After a round that warmed nothing (every writer busy or refused), a workspace is tried
# again after 1, 2, 4 … seconds up to this; a session's end tries it at once.
BACKOFF_MAX_SECONDS = 10.0


@dataclass
class WarmWriter:
    alias: str
    slot: WriterSlot
    agent: WarmAgent
    profile: Profile  # what pi was started with; a claim may change model and thinking
    image_id: str
    state_digest: str
    facts: EngineFacts  # the host's when the writer started


class WarmPool:
    """The warm writers of every workspace, held by this process. Thread-safe."""

    def __init__(
        self,
        paths: Paths,
        loaded: LoadedConfig,
        host: WriterHost | None = None,
        modes: ExecutionModes | None = None,
    ) -> None:
        self._paths = paths
        self._loaded = loaded
        self._modes = modes if modes is not None else load_modes(paths)
        self._host = host or open_host()
        self._warm: dict[str, WarmWriter] = {}  # by writer name
        self._lock = threading.Lock()
        self._warmed = threading.Condition(self._lock)  # notified when a warming ends
        self._warming: dict[str, int] = {}  # writers being warmed now, by workspace
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._spares: Callable[[int], object] | None = None
        self._refresh: Callable[[], object] | None = None
        self._spared = 0  # spare egress processes asked for last time
        self._retry: dict[str, tuple[int, float]] = {}  # alias: (failed rounds, next try)

    def reload(self, loaded: LoadedConfig, modes: ExecutionModes) -> None:
        """New settings (validated by the caller): the next fill warms or retires
        writers to the new counts."""
        self._loaded, self._modes = loaded, modes

    def keep_spares_with(self, spares: Callable[[int], object]) -> None:
        """How to keep one egress process started ahead per warm writer (the launcher's
        egress host): a claim then skips that process's start too."""
        self._spares = spares

    # -- what is warm ------------------------------------------------------------

    def wanted(self) -> dict[str, int]:
        """Each container workspace's warm count (0 omitted), from the last valid modes."""
        workspaces = self._modes.workspaces
        return {
            alias: entry.container.warm
            for alias, entry in workspaces.items()
            if entry.container is not None and entry.container.warm > 0
        }

    def pid_of(self, name: str) -> int | None:
        """The warm writer's pi launcher process (None: not warm)."""
        with self._lock:
            warm = self._warm.get(name)
        return warm.agent.pid if warm is not None else None

    def warm_names(self, alias: str | None = None) -> list[str]:
        with self._lock:
            return sorted(n for n, w in self._warm.items() if alias in (None, w.alias))

    # -- keeping them --------------------------------------------------------------

    def tick(self, fill: bool = True) -> None:
        """Yield what operators asked for, drop what died, and (with `fill`) start more."""
        self._yield_asked()
        if fill:
            self.fill()

    def fill(self) -> list[str]:
        """Warm writers up to each workspace's count; returns the names warmed now.
        Bounded by the sum of the warm counts (each at most 16)."""
        started: list[str] = []
        wanted = self.wanted()
        spares = sum(wanted.values())
        if self._spares is not None and (spares or self._spared):
            # Before pi starts: each spare's interpreter starts beside a writer's pi.
            # (Down to none when the counts drop to 0.)
            self._spares(spares)
            self._spared = spares
        for alias in {w.alias for w in list(self._warm.values())} - set(wanted):
            self._trim(alias, 0)
        for alias, count in sorted(wanted.items()):
            self._trim(alias, count)
            if time.monotonic() < self._retry.get(alias, (0, 0.0))[1]:
                continue
            while len(self.warm_names(alias)) < count and not self._stopping.is_set():
                self._yield_asked()  # an operator waits no longer than one writer's start
                warm = self._warm_one(alias)
                if warm is None:
                    self._back_off(alias)  # no other writer can be warmed now
                    break
                self._retry.pop(alias, None)
                started.append(warm.slot.name)
        return started

    def _back_off(self, alias: str) -> None:
        failed = self._retry.get(alias, (0, 0.0))[0] + 1
        wait = min(FILL_EVERY_SECONDS * 2 ** min(failed - 1, 8), BACKOFF_MAX_SECONDS)
        self._retry[alias] = (failed, time.monotonic() + wait)

    def wake(self) -> None:
        """A writer was released (a session ended): try every workspace at the next fill."""
        self._retry = {alias: (failed, 0.0) for alias, (failed, _) in self._retry.items()}

    def _trim(self, alias: str, count: int) -> None:
        for name in self.warm_names(alias)[count:]:
            self._retire(name, "surplus")

    def _profile(self, alias: str) -> Profile | None:
        entry = self._modes.workspaces.get(alias)
        if entry is None or entry.container is None:
            return None
        profiles = self._loaded.config.profiles
        named = [profiles[p] for p in entry.container.profiles if p in profiles]
        coding = (p for p in named if p.permission == "coding")
        return next((p for p in coding if warm_backend_for(p.agent) is not None), None)

    def _warm_one(self, alias: str) -> WarmWriter | None:
        """Lease a writer the guard admits and start pi in it without any credential."""
        profile = self._profile(alias)
        if profile is None:
            return None
        try:
            slot = lease_ready_writer(self._paths, self._loaded, alias, None, self._host)
        except WriterpoolError as exc:
            # Said once per streak: a pool whose writers are all busy tries every round.
            level = logging.DEBUG if alias in self._retry else logging.INFO
            log.log(level, "workspace %s: no writer warmed (%s)", alias, exc.code)
            return None
        writer_dir = self._paths.writer_dir(slot.name)
        if yield_asked(writer_dir):  # an operator command waits for it
            slot.release()
            return None
        slot.lease.mark_warm()
        with self._lock:
            self._warming[alias] = self._warming.get(alias, 0) + 1
        try:
            warm = self._start(alias, slot, profile)
            # The guard admitted the clone under this lease and an idle pi changes
            # nothing: the verdict stays current until a claim or a retirement advances
            # the count.
            remember(writer_dir, lease_count(writer_dir), Verdict(LEASABLE, "warm", ()))
        except BaseException:
            slot.release()
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

    def _start(self, alias: str, slot: WriterSlot, profile: Profile) -> WarmWriter:
        config = self._loaded.config
        backend = warm_backend_for(profile.agent)
        assert backend is not None  # _profile picks only those
        # Rendered without any key: until a claim grants one, the agent has nothing to send.
        with slot.host.agent_dir(slot.writer) as agent_dir:
            remove_credentials(agent_dir)
            backend.render(config, agent_dir, profile.provider, True)
        command = backend.container_command(
            profile, False, AGENT_DIR, agent_launch.CONTAINER_SESSION_DIR
        )
        agent = backend.start(slot.agent_argv(command), slot.agent_env(), None, READY_SECONDS)
        digest = self._paths.writer_record(slot.name).state_digest()
        return WarmWriter(
            alias=alias, slot=slot, agent=agent, profile=profile, image_id=slot.spec.image_id,
            state_digest=digest, facts=self._host.facts(),
        )  # fmt: skip

    def _yield_asked(self) -> None:
        """Bounded by the warm writers (at most 16 per workspace)."""
        for name in self.warm_names():
            with self._lock:
                warm = self._warm.get(name)
            if warm is None:
                continue
            if yield_asked(self._paths.writer_dir(name)):
                self._retire(name, "an operator command asked for it")
            elif not warm.agent.alive:
                self._retire(name, "its pi ended")

    def _retire(self, name: str, why: str) -> None:
        """Stop the writer's pi and container and release its lease."""
        with self._lock:
            warm = self._warm.pop(name, None)
        if warm is None:
            return
        log.info("writer %s is no longer warm: %s", name, why)
        try:
            warm.agent.close(CLOSE_SECONDS)
        finally:
            try:
                advance(self._paths.writer_dir(name))  # the next lease inspects it again
            finally:
                warm.slot.release()

    # -- claiming --------------------------------------------------------------------

    def claim(self, alias: str, base: str | None, profile: Profile) -> WarmWriter | None:
        """A warm writer of `alias` on `base` (default: the workspace's) for a session of
        `profile`, taken out of the pool; None when none is warm or still current.
        Bounded by the workspace's warm writers."""
        for name in self.warm_names(alias):
            with self._lock:
                warm = self._warm.get(name)
                wanted = (profile.provider, profile.agent)
                if warm is None or (warm.profile.provider, warm.profile.agent) != wanted:
                    continue
                if base is not None and warm.slot.base_ref != base:
                    continue
                del self._warm[name]
            why = self._stale(warm)
            if why is None:
                advance(self._paths.writer_dir(name))  # the session will change the clone
                return warm
            with self._lock:
                self._warm[name] = warm
            self._retire(name, why)
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
        """Why a warm writer may no longer take a session (None: it may). No Podman call:
        the running container is the image; the settings, acceptance and clone checks
        are file reads."""
        writer_dir = self._paths.writer_dir(warm.slot.name)
        state = warm.slot.state
        if not warm.agent.alive:
            return "its pi ended"
        if yield_asked(writer_dir):
            return "an operator command asked for it"
        if state is None or WriterRecord(writer_dir).state_digest() != warm.state_digest:
            return "its state changed"
        verdict = current(writer_dir)
        if verdict is None or verdict.code != LEASABLE:
            return "its admission verdict is not current"
        if not control_current(self._paths):
            return "isolation_control_required"
        pin = load_pin(self._paths)
        if state.image == "default" and (pin is None or pin.image_id != warm.image_id):
            return "the pinned image changed"
        groups = groups_given(
            self._paths,
            warm.slot.host,
            state,
            self._loaded.config.pool,
            warm.image_id,
            warm.facts,
        )
        if fingerprint_of(groups) != state.fingerprint:
            return "writer_acceptance_stale"
        return None

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
