"""What a Podman host over SSH offers: one probe gathering RemoteFacts for doctor.

Each step runs only when the one before it worked, and keeps its failure as text;
doctor's checks over these facts are pure (doctor/remote.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import Field, ValidationError

from writerpool.config.hosts import HostConfig
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed
from writerpool.runtime.image_transfer import remote_image_id
from writerpool.runtime.info import PodmanInfo, _Parsed
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.runtime.ssh import SshRoute


class _Store(_Parsed):
    graph_root: str = Field(default="", alias="graphRoot")


class RemoteInfo(_Parsed):
    """The parts of the host's `podman info` doctor reads beyond PodmanInfo."""

    store: _Store = Field(default_factory=_Store)


@dataclass(frozen=True)
class RemoteFacts:
    name: str
    reach_error: WriterpoolError | None = None
    api_error: str | None = None
    info: PodmanInfo | None = None
    version: str = ""
    image_present: bool | None = None  # None: not asked (no pin, or no API)
    free_bytes: int | None = None
    disk_error: str | None = None
    missing_tools: tuple[str, ...] = ()


# What writerpool runs on the host as its SSH user: its podman (the streams and a
# session's pi ride the connection to it) and python3 (acceptance's loopback listener
# and the isolation control's harness).
HOST_TOOLS = ("podman", "python3")


def probe_host(name: str, host: HostConfig, image_id: str | None) -> RemoteFacts:
    try:
        ssh = SshRoute.from_config(name, host)
        ssh.exec(["true"], timeout=20)
    except WriterpoolError as exc:
        return RemoteFacts(name, reach_error=exc)
    try:
        with connect(name, host) as remote:
            return _probe_podman(ssh, remote, image_id)
    except WriterpoolError as exc:
        return RemoteFacts(name, api_error=exc.message)


def _probe_podman(ssh: SshRoute, remote: RemotePodman, image_id: str | None) -> RemoteFacts:
    name = ssh.name
    try:
        raw = remote.cli(["info", "--format", "json"], timeout=60).out
        info, extra = (
            PodmanInfo.model_validate_json(raw),
            RemoteInfo.model_validate(json.loads(raw)),
        )
    except CommandFailed as exc:
        return RemoteFacts(name, api_error=exc.message)
    except (ValidationError, ValueError):
        return RemoteFacts(name, api_error="`podman info` on the host did not parse")
    present = remote_image_id(remote, image_id) == image_id if image_id else None
    free, disk_error = _free_bytes(ssh, extra.store.graph_root)
    return RemoteFacts(name, None, None, info, info.version.version, present, free, disk_error,
                       _missing_tools(ssh))  # fmt: skip


def _missing_tools(ssh: SshRoute) -> tuple[str, ...]:
    """Which of HOST_TOOLS a non-interactive SSH session's PATH lacks."""
    script = 'for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done'
    done = ssh.exec(["sh", "-c", script, "sh", *HOST_TOOLS], timeout=20)
    return tuple(t for t in HOST_TOOLS if t in done.out.split())


def _free_bytes(ssh: SshRoute, path: str) -> tuple[int | None, str | None]:
    """Bytes available to the host's container storage (POSIX `df -Pk`)."""
    if not path.startswith("/"):
        return None, "the host's `podman info` names no storage directory"
    done = ssh.exec(["df", "-Pk", "--", path], timeout=20)
    lines = done.out.strip().splitlines()
    try:
        return int(lines[-1].split()[3]) * 1024, None
    except (IndexError, ValueError):
        return None, "`df` on the host gave no answer for the storage directory"
