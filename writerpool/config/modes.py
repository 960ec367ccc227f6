"""execution-modes.json: written only by writerpool, atomic, 0600, versioned."""

from __future__ import annotations

import json
import re
from typing import Literal

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from writerpool.atomic import write_atomic
from writerpool.config.network import DEFAULT_NETWORK, NetworkKind
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.untrusted import DocumentRefused, loads_json, read_regular

MODES_SCHEMA_VERSION = 1
IMAGE_ID_RE = re.compile(r"^[0-9a-f]{64}$")
HOST_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
LOCAL_HOST = "local"  # config.hosts.LOCAL: this machine's own Podman

Mode = Literal["host", "container", "read-only"]
# container: a leased writer; readonly_container: a throwaway container with the
# checkout read-only; host: the operator's checkout, with the operator's rights.
Placement = Literal["host", "container", "readonly_container"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ContainerSettings(Strict):
    profiles: tuple[str, ...] = Field(min_length=1)
    writers: int = Field(default=1, ge=1, le=16)
    lifecycle: Literal["persistent", "ephemeral"] = "persistent"
    image: str = "default"
    network: NetworkKind = DEFAULT_NETWORK
    tags: Literal["none", "reachable"] = "none"
    cache: Literal["none", "go", "uv"] = "none"
    base: str
    # The egress allowlist's words as given (hosts, ranges, set names); sets are expanded
    # when a session starts. None: no allowlist, no CONNECT proxy.
    allow: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=64)
    # How many of the writers the pool service keeps started and idle for a claim.
    warm: int = Field(default=0, ge=0, le=16)
    # The hosts writers are placed on, in order (see host_for); None: `local` only.
    hosts: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=16)
    # How many of `warm` each placed host keeps (`--warm HOST=N,…`); None: spread as the
    # writers are placed (warm_by_host).
    warm_hosts: dict[str, int] | None = Field(default=None, alias="warmHosts")

    @model_validator(mode="after")
    def _image(self) -> ContainerSettings:
        if self.image != "default" and not IMAGE_ID_RE.fullmatch(self.image):
            raise ValueError("image must be 'default' or a 64-hex local image id")
        if self.allow is not None and self.network != "provider":
            raise ValueError("an allowlist needs the provider network")
        if self.warm > self.writers:
            raise ValueError("warm cannot exceed writers")
        if self.hosts is not None:
            if len(set(self.hosts)) != len(self.hosts):
                raise ValueError("hosts: each host once")
            if not all(HOST_NAME_RE.fullmatch(h) for h in self.hosts):
                raise ValueError("hosts: `local` or names of [hosts.NAME] tables")
        return self

    @model_validator(mode="after")
    def _warm_spread(self) -> ContainerSettings:
        if self.warm_hosts is None:
            return self
        if sum(self.warm_hosts.values()) != self.warm:
            raise ValueError("warmHosts must add up to warm")
        for host, count in self.warm_hosts.items():
            if host not in self.placed_on():
                raise ValueError(f"warm: {host} is not one of the hosts writers are placed on")
            if not 0 < count <= self.writers_on(host):
                raise ValueError(f"warm: {host} holds {self.writers_on(host)} writer(s)")
        return self

    def placed_on(self) -> tuple[str, ...]:
        return self.hosts or (LOCAL_HOST,)

    def writers_on(self, host: str) -> int:
        placed = self.placed_on()
        return sum(1 for index in range(1, self.writers + 1) if host_for(index, placed) == host)

    def warm_by_host(self) -> dict[str, int]:
        """Each host's warm count (0 omitted): as given, else the first `warm` writers'
        hosts (with `local,b`, `--warm 3` keeps 2 on local and 1 on b)."""
        if self.warm_hosts is not None:
            return {host: count for host, count in self.warm_hosts.items() if count}
        spread: dict[str, int] = {}
        for index in range(1, self.warm + 1):
            host = host_for(index, self.placed_on())
            spread[host] = spread.get(host, 0) + 1
        return spread


def host_for(index: int, hosts: tuple[str, ...]) -> str:
    """The placement rule: writer `index` (1-based) on the hosts in the order given,
    round robin: with `local,b` w1 is on local, w2 on b, w3 on local. Adding writers
    never moves a writer that exists."""
    return hosts[(index - 1) % len(hosts)]


def parse_warm(text: str) -> tuple[int, dict[str, int] | None]:
    """`--warm`: a count spread over the placed hosts, or `HOST=N,…` per host; the total
    and the per-host counts (None: spread). ValueError says what is wrong."""
    if text.strip().isdigit():
        return int(text), None
    counts: dict[str, int] = {}
    for word in (w.strip() for w in text.split(",")):
        host, sep, count = word.partition("=")
        if not sep or not HOST_NAME_RE.fullmatch(host) or not count.isdigit():
            raise ValueError("--warm takes a count or HOST=N,… (hosts writers are placed on)")
        if host in counts:
            raise ValueError(f"--warm: {host} is given twice")
        counts[host] = int(count)
    return sum(counts.values()), counts


class ModeEntry(Strict):
    mode: Mode
    accept_host_writes: bool = Field(default=False, alias="acceptHostWrites")
    container: ContainerSettings | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModeEntry:
        if self.mode == "host" and not self.accept_host_writes:
            raise ValueError("host mode needs acceptHostWrites")
        if (self.mode == "container") != (self.container is not None):
            raise ValueError("container settings belong to container mode only")
        return self


class ExecutionModes(Strict):
    schema_version: Literal[1] = Field(default=1, alias="schemaVersion")
    workspaces: dict[str, ModeEntry] = {}


def load_modes(paths: Paths) -> ExecutionModes:
    try:
        raw = read_regular(paths.modes_file)
        return ExecutionModes.model_validate(loads_json(raw))
    except FileNotFoundError:
        return ExecutionModes()
    except DocumentRefused as exc:
        raise WriterpoolError("modes_file_invalid", f"execution-modes.json {exc.reason}") from exc
    except OSError as exc:
        raise WriterpoolError("modes_file_invalid", f"cannot read modes: {exc.strerror}") from exc
    except (ValueError, ValidationError) as exc:
        raise WriterpoolError("modes_file_invalid", "execution-modes.json is invalid") from exc


def _dump(modes: ExecutionModes) -> bytes:
    data = modes.model_dump(mode="json", by_alias=True, exclude_none=True)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def store_entry(paths: Paths, alias: str, entry: ModeEntry | None) -> None:
    """Set (or with None, drop) one workspace's entry; other entries are kept as read."""
    with FileLock(str(paths.modes_file) + ".lock"):
        current = load_modes(paths)
        workspaces = dict(current.workspaces)
        if entry is None:
            workspaces.pop(alias, None)
        else:
            workspaces[alias] = entry
        write_atomic(paths.modes_file, _dump(ExecutionModes(workspaces=workspaces)))


def placements(entry: ModeEntry | None) -> dict[str, Placement | None]:
    """Where each kind of session of a workspace runs (None: refused)."""
    coding: Placement | None
    if entry is None or entry.mode == "host":
        coding = "host"
    elif entry.mode == "read-only":
        coding = None
    else:
        coding = "container"
    return {"coding": coding, "readOnly": "readonly_container"}
