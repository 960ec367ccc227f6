"""The one place that talks to Podman: its REST API over the user's socket, and
the CLI where a container's stdio must be attached. `PodmanEngine` is one Podman engine's
containers; each `WriterHost` (runtime/host.py) runs its writers' containers on one:
runtime/local.py this account's, runtime/remote.py a host's over SSH."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar

from writerpool.errors import WriterpoolError
from writerpool.proc import (
    CommandFailed,
    Completed,
    clean_env,
    run,
    run_capped,
    run_streamed,
    start_daemon,
)
from writerpool.runtime import podman_api
from writerpool.runtime.host import LOCAL, ContainerRef
from writerpool.runtime.spec import LABEL_CONTROLLER, ContainerSpec

# The API service exits on its own after this many idle seconds.
SERVICE_IDLE_SECONDS = 30
# One API call (list or remove) gives up after this many seconds.
API_TIMEOUT = 30.0
# How long a started API service may take to listen: its start takes the image store's
# lock, which an image build writing a layer holds for seconds (10 s was too short on a
# loaded host).
SERVICE_START_SECONDS = 30.0

_T = TypeVar("_T")

# Podman's client version, by the executable's identity (path, device, inode, mtime,
# size). Every session start puts the version in the readiness fingerprint; asking
# Podman costs a process (about 0.1 s on a loaded host), and the answer can only change
# when an upgrade replaces the file, which changes its identity.
_Stamp = tuple[str, int, int, int, int]
_versions: dict[_Stamp, str] = {}


class PodmanUnavailable(WriterpoolError):
    def __init__(self, message: str, code: str = "podman_unavailable") -> None:
        super().__init__(code, message)


API_REMEDY = (
    "run `podman system service --time=0` by hand to see why it fails, or remove a stale "
    "socket under $XDG_RUNTIME_DIR/podman; `writerpool doctor` probes it (podman_api)"
)


class PodmanApiUnavailable(PodmanUnavailable):
    """The CLI may work while the API service does not: its own code, with the remedy."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{message}; {API_REMEDY}", code="podman_api_unavailable")


def podman_env() -> dict[str, str]:
    """Podman's storage and configuration belong to the OS account, not to writerpool's
    XDG settings: always run it with the account's real home."""
    return clean_env({"HOME": pwd.getpwuid(os.getuid()).pw_dir})


def file_stamp(path: str) -> tuple[int, int, int, int] | None:
    """A file's identity and version (device, inode, mtime, size); None when absent."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def executable_stamp(binary: str) -> _Stamp | None:
    """The identity of the file `binary` runs, found on the PATH Podman is run with."""
    found = shutil.which(binary, path=podman_env().get("PATH"))
    stamp = file_stamp(found) if found is not None else None
    return None if found is None or stamp is None else (found, *stamp)


def default_socket() -> Path:
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    return Path(runtime_dir) / "podman" / "podman.sock"


def socket_answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _first_name(names: object) -> str:
    if isinstance(names, list) and names:
        return str(names[0])
    return ""


def _label(attrs: dict[str, object], name: str) -> str:
    labels = attrs.get("Labels")
    return str(labels.get(name) or "") if isinstance(labels, dict) else ""


def _status(attrs: dict[str, object]) -> str:
    # A list entry carries State as a plain string; an inspect answer as a dict.
    state = attrs.get("State")
    if isinstance(state, dict):
        return str(state.get("Status", "unknown"))
    return str(state or "unknown")


class PodmanEngine:
    """One Podman engine: its CLI for attached stdio, its API for the rest. `name` is the
    writer host it serves."""

    def __init__(
        self, name: str = LOCAL, binary: str | None = None, socket_path: Path | None = None
    ) -> None:
        self._name = name
        self.binary = binary or os.environ.get("WRITERPOOL_PODMAN", "podman")
        explicit = os.environ.get("WRITERPOOL_PODMAN_SOCKET")
        self.socket_path = socket_path or (Path(explicit) if explicit else default_socket())

    @property
    def name(self) -> str:
        return self._name

    # -- CLI ---------------------------------------------------------------
    def cli(
        self,
        args: Sequence[str],
        *,
        timeout: float = 120.0,
        input: bytes | None = None,
        check: bool = True,
        limit: int | None = None,
    ) -> Completed:
        """The podman CLI; with `limit`, its stdout is held up to that many bytes
        (OutputTooLarge past it): for answers another machine decides."""
        argv = [self.binary, *args]
        try:
            if limit is None:
                return run(argv, env=podman_env(), timeout=timeout, input=input, check=check)
            done = run_capped(argv, env=podman_env(), timeout=timeout, input=input, limit=limit)
            if check and done.returncode != 0:
                raise CommandFailed(argv, done.returncode, done.stdout, done.stderr)
            return done
        except CommandFailed as exc:
            if exc.returncode == 127:
                raise PodmanUnavailable("podman is not installed") from exc
            raise

    def version(self) -> str:
        stamp = executable_stamp(self.binary)
        known = _versions.get(stamp) if stamp is not None else None
        if known is not None:
            return known
        try:
            # `--version` prints "podman version X" without starting Podman's runtime:
            # `podman version` takes the image store's lock first, and waits as long as
            # another process writes a layer (a session start failed on it in a full run).
            found = self.cli(["--version"], timeout=30)
        except CommandFailed as exc:
            raise PodmanUnavailable("podman does not answer") from exc
        version = found.out.strip().rpartition(" ")[2]
        if stamp is not None and version:
            _versions[stamp] = version
        return version

    def attach_argv(self, spec: ContainerSpec, command: list[str]) -> list[str]:
        """Full argv of a disposable container, for callers that attach its stdio."""
        return [self.binary, *spec.run_argv(command, interactive=True)]

    def attach_env(self) -> dict[str, str]:
        return podman_env()

    def run(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float = 120.0,
        input: bytes | None = None,
    ) -> Completed:
        """Run a disposable container to completion; stdout and stderr captured."""
        return self.cli(
            spec.run_argv(command, interactive=input is not None),
            timeout=timeout,
            input=input,
            check=False,
        )

    def stream(
        self,
        spec: ContainerSpec,
        command: list[str],
        *,
        timeout: float,
        input: bytes | IO[bytes],
        consume: Callable[[IO[bytes]], None],
    ) -> Completed:
        """Run a disposable container while `consume` reads its stdout as it comes."""
        try:
            return run_streamed(
                self.attach_argv(spec, command),
                env=self.attach_env(),
                timeout=timeout,
                input=input,
                consume=consume,
            )
        except BaseException:
            # The killed client may leave the container behind: it must not block the
            # next run of the same name.
            with contextlib.suppress(WriterpoolError):
                self._remove_left(spec)
            raise

    def _remove_left(self, spec: ContainerSpec) -> None:
        """The spec's container, by name only when this state made it: another state of
        the account may run one of that name (a writer's tool container)."""
        controller = spec.labels.get(LABEL_CONTROLLER)
        if controller is None:
            self.remove(spec.name)
            return
        for container in self.containers(LABEL_CONTROLLER, controller):  # this state's
            if container.name == spec.name:
                self.remove(container.id)

    def image_exists(self, image_id: str) -> bool:
        return self.cli(["image", "exists", image_id], timeout=30, check=False).returncode == 0

    # -- API ---------------------------------------------------------------
    def _ensure_service(self) -> None:
        if socket_answers(self.socket_path):
            return
        try:
            self.socket_path.parent.mkdir(parents=True, exist_ok=True)
            start_daemon(
                [
                    self.binary,
                    "system",
                    "service",
                    f"--time={SERVICE_IDLE_SECONDS}",
                    f"unix://{self.socket_path}",
                ],
                env=podman_env(),
            )
        except (OSError, CommandFailed) as exc:
            raise PodmanApiUnavailable("Podman's API service cannot be started") from exc
        deadline = time.monotonic() + SERVICE_START_SECONDS
        while time.monotonic() < deadline:
            if socket_answers(self.socket_path):
                return
            time.sleep(0.05)
        raise PodmanApiUnavailable("Podman's API service did not come up")

    def _api(self, call: Callable[[], _T], what: str) -> _T:
        # The service exits after an idle time: a connect may lose that race once, so
        # start it again and retry once before calling it unavailable.
        for attempt in (1, 2):
            self._ensure_service()
            try:
                return call()
            except podman_api.ApiError as exc:
                if attempt == 2 or exc.status is not None:
                    raise PodmanApiUnavailable(f"Podman's API service failed to {what}") from exc
        raise AssertionError("unreachable")

    def containers(self, label: str, value: str) -> list[ContainerRef]:
        """Every container (any state) carrying label=value."""
        found = self._api(
            lambda: podman_api.list_by_label(self.socket_path, label, value, API_TIMEOUT),
            "list containers",
        )
        return [
            ContainerRef(
                str(c.get("Id", "")),
                _first_name(c.get("Names")),
                _status(c),
                _label(c, LABEL_CONTROLLER),
            )
            for c in found
        ]

    def leftovers(self) -> list[ContainerRef]:
        """Containers only Podman's storage holds (a client killed while it made one)."""
        found = self._api(
            lambda: podman_api.list_storage_only(self.socket_path, API_TIMEOUT),
            "list containers",
        )
        return [ContainerRef(str(c.get("Id", "")), _first_name(c.get("Names")), "storage", "",
                             age) for c, age in found]  # fmt: skip

    def remove(self, container_id: str) -> None:
        # No grace period: a writer's container is disposable, and its PID 1 may
        # ignore SIGTERM, which would cost the whole stop timeout.
        self._api(
            lambda: podman_api.remove(self.socket_path, container_id, API_TIMEOUT),
            "remove a container",
        )
