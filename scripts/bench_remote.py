"""remote_*: the paths a writer on a host over SSH uses, beside the same on this machine,
in one run: a container's start (`podman run --rm IMAGE true`), 50 MB streamed into a
container's stdin (how provisioning sends a base bundle) and out of its stdout (how
collection brings one back) by `WriterHost.stream` on each host, the same through the
bare podman CLI over the forwarded API socket (`_api` rows: Podman's remote attach, for
comparison), a writer's clone provisioned by that stream (pool/provision/stream.py:
bundle, container, verified answer), and that writer's new work (20 MB on a branch)
collected back (pool/collect/stream.py: inspection and bundle). Ours: through the host's
pinned connection (scripts/testhost, WRITERPOOL_TESTHOST_*); baseline: this machine's
Podman. Goals: start at most 0.3 s more than local, stream in and provisioning at most
1.3x, stream out and collect at most 1.5x.
"""

from __future__ import annotations

import io
import os
import secrets
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from bench_figures import Figure

from tests.support.repos import make_repo
from writerpool.config.hosts import HostConfig
from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.gitops.base import resolve_base
from writerpool.pool.collect.stream import stream_collect
from writerpool.pool.provision.make import base_record
from writerpool.pool.provision.stream import clone_on_host
from writerpool.pool.writer.inspect import tool_spec
from writerpool.report import Report
from writerpool.runtime.host import WriterHost, writer_at
from writerpool.runtime.image_transfer import transfer_image
from writerpool.runtime.local import LocalPodman
from writerpool.runtime.podman import PodmanEngine, podman_env
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import WriterState, save_state

PAYLOAD = 50 * 1024 * 1024
START_EXTRA_GOAL = 0.3
# The provisioned repository: a history of this many commits of FILES files each.
PROVISION_COMMITS, PROVISION_FILES = 300, 200
# The work remote_collect brings back: one commit of incompressible data on a new branch.
COLLECT_WORK_BYTES = 20 * 1024 * 1024
_WORK = (
    "cd /work && git checkout -q -b bench-work"
    f" && head -c {COLLECT_WORK_BYTES} /dev/urandom > work.bin && git add work.bin"
    " && git -c user.name=bench -c user.email=bench@bench.test commit -q -m work"
)


def configured() -> HostConfig | None:
    url = os.environ.get("WRITERPOOL_TESTHOST_URL")
    if not url:
        return None
    return HostConfig(url=url, identity=Path(os.environ["WRITERPOOL_TESTHOST_IDENTITY"]),
                known_hosts=Path(os.environ["WRITERPOOL_TESTHOST_KNOWN_HOSTS"]))  # fmt: skip


def _run_argv(podman: PodmanEngine, image: str, command: list[str], interactive: bool) -> list[str]:
    url = podman.url_args() if isinstance(podman, RemotePodman) else []
    flags = ["run", "--rm", "--pull=never", "--network=none", "--log-driver=none"]
    return [podman.binary, *url, *flags, *(["-i"] if interactive else []), image, *command]


def _timed(argv: list[str], data: bytes | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, input=data, capture_output=True, timeout=600, env=podman_env(),
                          stdin=None if data is not None else subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: {argv[0]} failed: {done.stderr.decode()[-500:]}")
    return seconds


def _drain(out: IO[bytes]) -> None:
    while out.read(1 << 20):  # bounded by what the container writes
        pass


def _streamed(host: WriterHost, image: str, command: list[str], data: bytes) -> float:
    """`WriterHost.stream` of a disposable container, as provisioning and collection use it."""
    spec = ContainerSpec(image_id=image, name=f"writerpool-bench-{secrets.token_hex(4)}",
                         workdir="/tmp")  # fmt: skip
    start = time.perf_counter()
    done = host.stream(spec, command, timeout=600, input=io.BytesIO(data), consume=_drain)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench: stream failed on {host.name}: {done.stderr[-500:]!r}")
    return seconds


def _pair(name: str, reps: int, goal: float | None, measure: Callable[[str], float]) -> Figure:
    figure = Figure(name, goal=goal, ours_label="host over SSH", baseline_label="local")
    for _ in range(reps):  # bounded by reps
        for sample, podman in ((figure.ours, "remote"), (figure.baseline, "local")):
            sample.append(measure(podman))
    return figure


class Provisioner:
    """One writer per host, provisioned again at each measurement (as a redo would)."""

    def __init__(self, root: Path) -> None:
        self.repo = make_repo(root / "repos" / "remote-provision", PROVISION_COMMITS,
                              PROVISION_FILES)  # fmt: skip
        self.base = resolve_base(self.repo, "main")
        self.paths = Paths.from_env()
        self.states: dict[str, WriterState] = {}
        self.worked: dict[str, WriterState] = {}

    def state(self, host: WriterHost) -> WriterState:
        if host.name not in self.states:
            name = f"benchprov{len(self.states)}-w1"
            state = WriterState(name=name, alias=name[:-3], settings_digest="sha256:" + "0" * 64,
                                image="default", network="none", cache="none",
                                lifecycle="persistent", tags="none", profiles=("code",),
                                base=base_record(self.base), host=host.name)  # fmt: skip
            save_state(self.paths.writer_dir(name), state)
            host.create_storage(writer_at(self.paths, name, host.name), cache=False)
            self.states[host.name] = state
        return self.states[host.name]

    def timed(self, host: WriterHost) -> float:
        state = self.state(host)
        start = time.perf_counter()
        clone_on_host(self.paths, host, state, Pool(), self.repo, self.base, Report("bench"))
        return time.perf_counter() - start

    def collect_timed(self, host: WriterHost) -> float:
        """The clone's work (a branch with COLLECT_WORK_BYTES of new data, added once) sent
        back as `writer collect` receives it: inspection and bundle in one stream."""
        state = self.worked.get(host.name)
        if state is None:
            state = self.state(host)
            baseline = clone_on_host(self.paths, host, state, Pool(), self.repo, self.base,
                                     Report("bench"))  # fmt: skip
            spec = tool_spec(self.paths, host, state, Pool(), "bench", clone_rw=True)
            made = host.run(spec, ["sh", "-ec", _WORK], timeout=300)
            if made.returncode != 0:
                raise SystemExit(f"bench: no work made on {host.name}: {made.stderr[-500:]!r}")
            state = self.worked[host.name] = state.model_copy(update={"baseline": baseline})
        with tempfile.TemporaryDirectory(prefix="bench-collect-") as incoming:
            start = time.perf_counter()
            stream_collect(self.paths, host, state, Pool(), Path(incoming))
            return time.perf_counter() - start

    def remove(self, hosts: list[WriterHost]) -> None:
        for host in hosts:  # bounded by the two hosts measured
            if host.name in self.states:
                host.remove_storage(writer_at(self.paths, self.states[host.name].name, host.name))


def remote_figures(image: str, reps: int, root: Path) -> list[Figure]:
    host = configured()
    if host is None:
        raise SystemExit("bench: remote needs WRITERPOOL_TESTHOST_* (scripts/testhost up)")
    local = LocalPodman()
    blob = os.urandom(PAYLOAD)
    with connect("bench", host) as remote:
        transfer_image(local, remote, image, lambda sent, total: None)
        by: dict[str, RemotePodman | LocalPodman] = {"remote": remote, "local": local}
        start = _pair("remote_container_start", reps, None,
                      lambda p: _timed(_run_argv(by[p], image, ["true"], False)))  # fmt: skip
        sink = ["sh", "-c", "cat > /dev/null"]
        source = ["head", "-c", str(PAYLOAD), "/dev/zero"]
        stream_in = _pair("remote_stream_in", reps, 1.3,
                          lambda p: _streamed(by[p], image, sink, blob))  # fmt: skip
        stream_out = _pair("remote_stream_out", reps, 1.5,
                           lambda p: _streamed(by[p], image, source, b""))  # fmt: skip
        api_in = _pair("remote_stream_in_api", reps, None,
                       lambda p: _timed(_run_argv(by[p], image, sink, True), blob))  # fmt: skip
        api_out = _pair("remote_stream_out_api", reps, None,
                        lambda p: _timed(_run_argv(by[p], image, source, False)))  # fmt: skip
        provisioner = Provisioner(root)
        try:
            provision = _pair("remote_provision", reps, 1.3,
                              lambda p: provisioner.timed(by[p]))  # fmt: skip
            collect = _pair("remote_collect", reps, 1.5,
                            lambda p: provisioner.collect_timed(by[p]))  # fmt: skip
        finally:
            provisioner.remove([remote, local])
    return [start, stream_in, stream_out, api_in, api_out, provision, collect]


def start_line(figure: Figure) -> str:
    extra = statistics.median(figure.ours) - statistics.median(figure.baseline)
    verdict = "met" if extra <= START_EXTRA_GOAL else "MISSED"
    return f"  remote start costs {extra:+.3f} s over local  [goal <= +{START_EXTRA_GOAL} s: {verdict}]"
