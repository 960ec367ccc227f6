"""`writerpool image build`: mmdebstrap, podman import, podman build; no container registry."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, TextIO

import filelock

from writerpool.atomic import ensure_private_dir
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.proc import clean_env, spawn
from writerpool.report import sanitize
from writerpool.runtime.image import (
    HEX64,
    LABEL_INPUTS,
    LABEL_ROOTFS,
    LABEL_VERSION,
    ROOTFS_REPO,
    ImageDefinition,
    save_pin,
    tagged_image,
)
from writerpool.runtime.image_tools import CONTEXT as TOOLS_CONTEXT
from writerpool.runtime.image_tools import stage_tools
from writerpool.runtime.image_uv import fetch_uv
from writerpool.runtime.podman import podman_env
from writerpool.state.images import BuiltImage, record_built

# The agents the image carries besides pi, as agent/native.py's pins_text writes them.
LABEL_AGENTS = "io.writerpool.agents"
MMDEBSTRAP_TIMEOUT = 1800.0
IMPORT_TIMEOUT = 600.0
BUILD_TIMEOUT = 1200.0
# apt inside mmdebstrap needs the operator's proxy settings; they reach only that child.
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")

RootfsSource = Literal["image", "tarball", "mmdebstrap"]


class Progress:
    """Step lines always; the tools' own output only when verbose (a terminal)."""

    def __init__(self, stream: TextIO | None, *, verbose: bool) -> None:
        self.stream = stream
        self.verbose = verbose and stream is not None

    def step(self, text: str) -> None:
        if self.stream is not None:
            print(f"image: {text}", file=self.stream, flush=True)

    def output(self, chunk: bytes) -> None:
        if self.verbose and self.stream is not None:
            self.stream.write(chunk.decode(errors="replace"))
            self.stream.flush()


@dataclass(frozen=True)
class PiSource:
    """Where the build gets the agents, all from npm. `installed`: pi and the native
    agents are in their npm prefixes already, so no network is needed; `reach`: why npm
    cannot reach its registry now (None: it can), asked, bounded, before anything slow
    starts; `install`: install pi, return its prefix; `agents`: install Claude Code and
    Codex (pins checked) and stage their binaries into the given build context."""

    installed: Callable[[], bool]
    reach: Callable[[], str | None]
    install: Callable[[], Path]
    agents: Callable[[Path], Path]


@dataclass(frozen=True)
class BuildOutcome:
    image_id: str
    inputs_digest: str
    tag: str
    reused: bool
    rootfs: RootfsSource | None  # None when the finished image was reused
    seconds: float


# --------------------------------------------------------------------- processes


def _stop(proc_pid: int, poll: Callable[[], int | None]) -> None:
    """Ask the tool's process group to stop (mmdebstrap removes its temp dir), then kill."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc_pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if poll() is not None:
                return
            time.sleep(0.1)


class ToolFailed(WriterpoolError):
    """A build tool exited non-zero: its code and what it printed, for callers that tell
    one failure from another."""

    def __init__(self, message: str, returncode: int, out: bytes) -> None:
        super().__init__("image_build_failed", message)
        self.returncode = returncode
        self.out = out


def run_tool(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    timeout: float,
    progress: Progress,
    what: str,
    cwd: Path | None = None,
) -> bytes:
    """Run a build tool, echoing its output when verbose; return its stdout."""
    try:
        proc = spawn(argv, cwd=cwd, env=env, stdin_pipe=False)
    except FileNotFoundError as exc:
        raise WriterpoolError("image_build_failed", f"{argv[0]} is not installed") from exc
    out, err = bytearray(), bytearray()
    with proc:  # closes the pipes and reaps the process however this ends
        try:
            _pump(((proc.stdout, out), (proc.stderr, err)), progress=progress,
                  deadline=time.monotonic() + timeout, what=what)  # fmt: skip
        except BaseException:  # timeout, Ctrl-C: never leave a builder running
            _stop(proc.pid, proc.poll)
            raise
    returncode = proc.returncode
    if returncode != 0:
        message = sanitize(f"{what} exited {returncode}: {_cause(err)[-300:]}")
        raise ToolFailed(message, returncode, bytes(out))
    return bytes(out)


def _cause(stderr: bytearray) -> str:
    """The first apt/mmdebstrap error line names the cause; otherwise the last line."""
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("E: ", "Error: "))]
    return (errors or lines or [""])[0 if errors else -1]


def _pump(
    pipes: Sequence[tuple[IO[bytes] | None, bytearray]],
    *,
    progress: Progress,
    deadline: float,
    what: str,
) -> None:
    """Copy the pipes into their buffers until they close, echoing when verbose."""
    with selectors.DefaultSelector() as sel:
        for pipe, buf in pipes:
            if pipe is not None:
                sel.register(pipe, selectors.EVENT_READ, buf)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WriterpoolError("image_build_failed", f"{what} timed out")
            for key, _ in sel.select(timeout=min(remaining, 5.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                progress.output(chunk)


def _mmdebstrap_env() -> dict[str, str]:
    return clean_env({k: os.environ[k] for k in PROXY_VARS if k in os.environ})


# ------------------------------------------------------------------ build steps


def mmdebstrap_argv(definition: ImageDefinition, output: Path) -> list[str]:
    spec = definition.rootfs
    argv = [
        "mmdebstrap", "--mode=unshare", f"--variant={spec.variant}", "--format=tar",
        f"--include={','.join(sorted(set(spec.packages)))}",
    ]  # fmt: skip
    argv += [f"--dpkgopt=path-exclude={p}" for p in spec.dpkg_path_exclude]
    argv += [f"--dpkgopt=path-include={p}" for p in spec.dpkg_path_include]
    return [*argv, "--", spec.suite, str(output), spec.mirror.rstrip("/")]


def _tarball(paths: Paths, rootfs_digest: str) -> Path:
    return paths.image_cache_dir / f"rootfs-{rootfs_digest[:16]}.tar"


def _make_tarball(paths: Paths, definition: ImageDefinition, progress: Progress) -> Path:
    """Run mmdebstrap into a temporary name, then keep only this tarball in the cache."""
    tarball = _tarball(paths, definition.rootfs_digest())
    partial = tarball.with_name(tarball.name + ".partial")
    partial.unlink(missing_ok=True)  # left by an interrupted run
    progress.step(
        f"building the Debian {definition.rootfs.suite} root file system with mmdebstrap "
        f"({len(definition.rootfs.packages)} packages)"
    )
    run_tool(mmdebstrap_argv(definition, partial), env=_mmdebstrap_env(),
             timeout=MMDEBSTRAP_TIMEOUT, progress=progress, what="mmdebstrap")  # fmt: skip
    partial.chmod(0o600)
    partial.replace(tarball)
    # Only the newest root file system is kept: each is about 400 MB.
    for stale in paths.image_cache_dir.glob("rootfs-*.tar*"):
        if stale != tarball:
            stale.unlink()
    return tarball


def _import(tarball: Path, rootfs_digest: str, progress: Progress) -> str:
    progress.step("importing the root file system into Podman")
    argv = [
        "podman", "import", "--quiet", "--message", "writerpool writer root file system",
        "--change", f"LABEL {LABEL_ROOTFS}={rootfs_digest}",
        str(tarball), _rootfs_tag(rootfs_digest),
    ]  # fmt: skip
    raw = run_tool(argv, env=podman_env(), timeout=IMPORT_TIMEOUT, progress=progress,
                   what="podman import")  # fmt: skip
    return _image_id(raw.decode(errors="replace").strip().splitlines()[-1:])


def _rootfs_tag(rootfs_digest: str) -> str:
    return f"{ROOTFS_REPO}:{rootfs_digest[:16]}"


def _image_id(lines: list[str]) -> str:
    image_id = lines[0].removeprefix("sha256:").strip() if lines else ""
    if not HEX64.match(image_id):
        raise WriterpoolError("image_build_failed", "podman did not report a 64-hex image ID")
    return image_id


def ensure_rootfs(
    paths: Paths, definition: ImageDefinition, progress: Progress, *, force: bool
) -> tuple[str, RootfsSource]:
    """The imported root file system's image ID: reused image, cached tarball, or mmdebstrap."""
    digest = definition.rootfs_digest()
    if not force:
        found = tagged_image(_rootfs_tag(digest), LABEL_ROOTFS, digest)
        if found is not None and found.label(LABEL_INPUTS) is None:
            progress.step(f"reusing the imported root file system {found.id[:12]}")
            return found.id, "image"
    tarball = _tarball(paths, digest)
    source: RootfsSource = "tarball"
    if force or not tarball.exists():
        tarball = _make_tarball(paths, definition, progress)
        source = "mmdebstrap"
    else:
        progress.step("reusing the cached root file system tarball")
    return _import(tarball, digest, progress), source


def podman_build_argv(
    definition: ImageDefinition, base_id: str, pi_prefix: Path, iidfile: Path, *, force: bool,
    uv_context: Path, tools_context: Path, agents_context: Path,
) -> list[str]:  # fmt: skip
    argv = [
        "podman", "build", "--pull=never", "--network=none",
        "--file", str(definition.containerfile_path),
        "--build-arg", f"BASE={base_id}",
        "--build-context", f"pi={pi_prefix}",
        "--build-context", f"uv={uv_context}",
        "--build-context", f"{TOOLS_CONTEXT}={tools_context}",
        "--build-context", f"agents={agents_context}",
        "--label", f"{LABEL_VERSION}={definition.writerpool_version}",
        "--label", f"{LABEL_INPUTS}={definition.inputs_digest()}",
        "--label", f"io.writerpool.pi={definition.pi_version}",
        "--label", f"{LABEL_AGENTS}={definition.agents}",
        "--tag", definition.tag, "--iidfile", str(iidfile),
    ]  # fmt: skip
    if force:
        argv.append("--no-cache")
    return [*argv, str(definition.directory)]


def _build(
    paths: Paths, definition: ImageDefinition, base_id: str, pi_prefix: Path,
    agents_context: Path, progress: Progress, *, force: bool,
) -> str:  # fmt: skip
    progress.step("building the writer image (agents and uv layer) with podman build")
    iidfile = paths.image_cache_dir / "build.iid"
    iidfile.unlink(missing_ok=True)
    uv_context = fetch_uv(paths.cache_dir)
    tools_context = stage_tools(paths.image_cache_dir / "tools")
    argv = podman_build_argv(definition, base_id, pi_prefix, iidfile, force=force,
                             uv_context=uv_context, tools_context=tools_context,
                             agents_context=agents_context)  # fmt: skip
    try:
        run_tool(argv, env=podman_env(), timeout=BUILD_TIMEOUT, progress=progress,
                 what="podman build")  # fmt: skip
        return _image_id(iidfile.read_text().splitlines())
    finally:
        iidfile.unlink(missing_ok=True)
        shutil.rmtree(tools_context, ignore_errors=True)
        shutil.rmtree(agents_context, ignore_errors=True)


@contextmanager
def _build_lock(paths: Paths, progress: Progress) -> Iterator[None]:
    """One build at a time per user: a second one waits, then most likely reuses."""
    lock = filelock.FileLock(str(paths.image_cache_dir / "build.lock"))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        progress.step("waiting for another image build to finish")
        lock.acquire(timeout=BUILD_TIMEOUT + MMDEBSTRAP_TIMEOUT)
    try:
        yield
    finally:
        lock.release()


def check_pi_source(pi: PiSource, progress: Progress) -> None:
    """Before mmdebstrap's minutes: when pi must be installed, npm must reach its
    registry (a proxy's certificate the host's CA variables miss fails here, not later)."""
    if pi.installed():
        return
    progress.step("checking that npm reaches its registry (the agents are installed from it)")
    problem = pi.reach()
    if problem is not None:
        raise WriterpoolError("npm_registry_unreachable", f"{problem}; nothing was built")


def build_image(
    paths: Paths,
    definition: ImageDefinition,
    pi: PiSource,
    progress: Progress,
    *,
    force: bool = False,
) -> BuildOutcome:
    """Build (or reuse) the writer image for definition, tag it and record it as the pin.

    pi.install installs the pinned pi into an npm prefix on the host and returns that
    prefix; it runs only when the pi layer has to be built, and then npm's reach of its
    registry is checked first, before any slow step.
    """
    if os.geteuid() == 0:
        raise WriterpoolError(
            "image_build_failed", "build the writer image as the unprivileged operator, not root"
        )
    started = time.monotonic()
    inputs = definition.inputs_digest()
    ensure_private_dir(paths.image_cache_dir)
    with _build_lock(paths, progress):
        found = None if force else tagged_image(definition.tag, LABEL_INPUTS, inputs)
        existing = found.id if found is not None else None
        rootfs: RootfsSource | None = None
        if existing is not None:
            progress.step(f"an image built from the same inputs exists: {existing[:12]}")
            image_id = existing
            # Found by its tag: maybe another install's build (one Podman storage per account).
            record_built(paths, [BuiltImage(id=image_id, kind="writer", found=True)])
        else:
            check_pi_source(pi, progress)
            base_id, rootfs = ensure_rootfs(paths, definition, progress, force=force)
            if rootfs == "image":  # found by its tag: maybe another install's import
                record_built(paths, [BuiltImage(id=base_id, kind="rootfs", found=True)])
            else:
                record_built(paths, [BuiltImage(id=base_id, kind="rootfs")])
            progress.step(f"pi {definition.pi_version}: installing with npm unless present")
            prefix = _install_pi(pi.install)
            progress.step("Claude Code and Codex: installing with npm unless present")
            agents_context = pi.agents(paths.image_cache_dir / "agents")
            image_id = _build(paths, definition, base_id, prefix, agents_context, progress,
                              force=force)  # fmt: skip
            record_built(paths, [BuiltImage(id=image_id, kind="writer", base=base_id)])
        save_pin(paths, image_id, inputs, definition.writerpool_version)
        progress.step(f"pinned {image_id[:12]} as the default writer image")
    return BuildOutcome(image_id, inputs, definition.tag, existing is not None, rootfs,
                        round(time.monotonic() - started, 1))  # fmt: skip


def _install_pi(install_pi: Callable[[], Path]) -> Path:
    try:
        return install_pi()
    except WriterpoolError as exc:
        raise WriterpoolError("image_build_failed", f"installing pi failed: {exc.message}") from exc
