"""A writer's storage as named volumes of its host: made, listed and removed through
that host's Podman (local, or over SSH), so nothing of the controller is mounted and
nothing but the host's own containers and account touch the files (the account writes a
remote session's agent directory: pool/remote_container.py)."""

from __future__ import annotations

import re

from writerpool.errors import WriterpoolError
from writerpool.runtime.podman import PodmanHost
from writerpool.runtime.spec import LABEL_WRITER

STORAGE = ("clone", "agent", "collections")
_WRITER = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,80}$")


def volume_name(writer: str, part: str) -> str:
    if not _WRITER.fullmatch(writer) or part not in (*STORAGE, "cache"):
        raise ValueError("not a writer name or storage part")
    return f"writerpool-{writer}-{part}"


def create_volumes(podman: PodmanHost, writer: str, *, cache: bool) -> dict[str, str]:
    """The writer's volumes (part -> volume name), made where missing; idempotent."""
    parts = (*STORAGE, *(("cache",) if cache else ()))
    made = {}
    for part in parts:  # bounded by STORAGE and cache: four at most
        name = volume_name(writer, part)
        if podman.cli(["volume", "exists", name], timeout=30, check=False).returncode != 0:
            podman.cli(["volume", "create", "--label", f"{LABEL_WRITER}={writer}", name],
                       timeout=60)  # fmt: skip
        made[part] = name
    return made


def writer_volumes(podman: PodmanHost, writer: str) -> list[str]:
    """Every volume carrying the writer's label on that host."""
    found = podman.cli(["volume", "ls", "--filter", f"label={LABEL_WRITER}={writer}",
                        "--format", "{{.Name}}"], timeout=60)  # fmt: skip
    return [n for n in found.out.split() if n.startswith("writerpool-")]


def remove_volumes(podman: PodmanHost, writer: str) -> int:
    """Remove the writer's volumes (the caller holds its lease and fenced its containers);
    the number removed. Whatever an agent made in them goes with them."""
    names = writer_volumes(podman, writer)
    for name in names:  # bounded by the writer's volumes: four at most
        done = podman.cli(["volume", "rm", "--force", "--", name], timeout=120, check=False)
        if done.returncode != 0 and podman.cli(["volume", "exists", name], timeout=30,
                                               check=False).returncode == 0:  # fmt: skip
            raise WriterpoolError("command_failed", f"the volume of {writer} cannot be removed")
    return len(names)
