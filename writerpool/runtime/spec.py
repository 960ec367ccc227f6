"""A writer container's launch settings as a typed model, rendered to `podman run` argv."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from writerpool.config.network import PodmanNetwork

LABEL_WRITER = "io.writerpool.writer"
LABEL_WORKSPACE = "io.writerpool.workspace"
LABEL_SETTINGS = "io.writerpool.settings"
LABEL_ROLE = "io.writerpool.role"
LABEL_SESSION = "io.writerpool.session"
# The writerpool state that made it (state/controller.py): a fence or a removal takes
# only its own state's containers and volumes, whatever their writer's name.
LABEL_CONTROLLER = "io.writerpool.controller"
# An operator view's container (writer status/diff/log) names the writer it reads here,
# never in LABEL_WRITER: fences and releases remove that writer's containers, not views.
LABEL_VIEW = "io.writerpool.view"

AGENT_HOME = "/home/agent"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Mount(Strict):
    source: Path
    target: str
    read_only: bool = False

    @field_validator("source")
    @classmethod
    def _plain(cls, value: Path) -> Path:
        # --mount takes comma-separated options: a comma or newline would inject one.
        if "," in str(value) or "\n" in str(value) or not value.is_absolute():
            raise ValueError("mount source must be an absolute path without commas")
        return value

    def argv(self) -> list[str]:
        opts = f"type=bind,src={self.source},dst={self.target}"
        return ["--mount", opts + (",ro=true" if self.read_only else "")]


VOLUME_RE = r"^writerpool-[a-z0-9][a-z0-9_.-]{0,100}$"


class VolumeMount(Strict):
    """A named volume of the container's own host: storage that lives where the container
    runs, with no path of the controller (a writer on a host over SSH)."""

    volume: str = Field(pattern=VOLUME_RE)
    target: str = Field(pattern=r"^/[A-Za-z0-9_./-]*$")
    read_only: bool = False

    def argv(self) -> list[str]:
        opts = f"type=volume,src={self.volume},dst={self.target}"
        return ["--mount", opts + (",ro=true" if self.read_only else "")]


def by_kind(
    mounts: list[Mount | VolumeMount],
) -> tuple[tuple[Mount, ...], tuple[VolumeMount, ...]]:
    """A spec's `mounts` and `volumes` from one list of either."""
    binds = tuple(m for m in mounts if isinstance(m, Mount))
    return binds, tuple(m for m in mounts if isinstance(m, VolumeMount))


class Limits(Strict):
    memory: str
    cpus: float
    pids: int


class ContainerSpec(Strict):
    """Everything that decides what a writer's container can reach."""

    image_id: str = Field(pattern=r"^[0-9a-f]{64}$")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    labels: dict[str, str] = {}
    mounts: tuple[Mount, ...] = ()
    volumes: tuple[VolumeMount, ...] = ()
    env: dict[str, str] = {}
    network: PodmanNetwork = "none"
    workdir: str = "/work"
    limits: Limits | None = None  # None where the host's cgroups cannot enforce them

    def digest(self) -> str:
        """Stable digest of the rendered spec (part of the acceptance fingerprint)."""
        dumped = self.model_dump(mode="json")
        if not dumped["volumes"]:
            del dumped["volumes"]  # a spec without volumes keeps the digest it always had
        data = json.dumps(dumped, sort_keys=True).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest()

    def run_argv(self, command: list[str], *, interactive: bool = False) -> list[str]:
        """`podman run` arguments (without the podman binary) for one disposable container."""
        argv = [
            "run", "--rm", "--pull=never", "--name", self.name,
            "--userns=keep-id", "--cap-drop=all", "--security-opt=no-new-privileges",
            "--read-only", "--read-only-tmpfs=false",
            "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777",
            "--tmpfs", f"{AGENT_HOME}:rw,nosuid,nodev,mode=1777",
            "--env", f"HOME={AGENT_HOME}", "--env", "TMPDIR=/tmp",
            "--network", self.network, "--hostname", "writer",
            "--log-driver=none", "--workdir", self.workdir,
        ]  # fmt: skip
        if interactive:
            argv.append("-i")
        for key, value in sorted(self.labels.items()):
            argv += ["--label", f"{key}={value}"]
        for mount in self.mounts:
            argv += mount.argv()
        for volume in self.volumes:
            argv += volume.argv()
        for key, value in sorted(self.env.items()):
            argv += ["--env", f"{key}={value}"]
        if self.limits is not None:
            argv += [
                "--memory", self.limits.memory,
                "--cpus", str(self.limits.cpus),
                "--pids-limit", str(self.limits.pids),
            ]  # fmt: skip
        return [*argv, self.image_id, *command]
