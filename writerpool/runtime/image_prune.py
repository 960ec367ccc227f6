"""Local images writerpool built (by the IDs images.json records), and their removal.

Neither labels nor tags are asked: an image built `FROM` the writer image inherits every
label, so an operator's own image would look like writerpool's, and another install of
the same account carries the same tags. Podman refuses to remove an image a container or
a child image uses; that is reported, never forced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, last_line, run
from writerpool.runtime.image import HEX64
from writerpool.runtime.podman import podman_env
from writerpool.state.images import BuiltImage, ImageRecord

TIMEOUT = 120.0
# Removal order: an image before the image it was built on.
KIND_ORDER = {"derived": 0, "writer": 1, "rootfs": 2}


class _Listed(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    id: str = Field(alias="Id", pattern=HEX64.pattern)
    size: int = Field(default=0, alias="Size")


@dataclass(frozen=True)
class LocalImage:
    """A recorded image that exists in local storage."""

    built: BuiltImage
    size: int

    @property
    def id(self) -> str:
        return self.built.id

    @property
    def kind(self) -> str:
        return self.built.kind

    def describe(self) -> str:
        named = f" {self.built.name!r}" if self.built.name else ""
        return f"{self.kind} image{named} {self.id[:12]} ({self.size // 1_000_000} MB)"


def _local() -> list[_Listed]:
    """Every local image, intermediate ones included (`podman images -a`)."""
    argv = ["podman", "images", "--all", "--format", "json"]
    try:
        done = run(argv, env=podman_env(), timeout=TIMEOUT)
    except CommandFailed as exc:
        raise WriterpoolError("podman_unavailable", "podman could not list images") from exc
    try:
        data = json.loads(done.out or "[]") or []
        listed = [_Listed.model_validate(item) for item in data]
    except (ValueError, ValidationError) as exc:
        raise WriterpoolError("podman_unavailable", "podman printed unexpected image JSON") from exc
    return listed


def recorded_images(record: ImageRecord) -> tuple[list[LocalImage], list[str]]:
    """The recorded images present locally (removal order), and the recorded IDs gone."""
    sizes = {i.id: i.size for i in _local()}
    present = [LocalImage(b, sizes[b.id]) for b in record.images if b.id in sizes]
    gone = [b.id for b in record.images if b.id not in sizes]
    return sorted(present, key=lambda i: (KIND_ORDER[i.kind], i.id)), gone


def prunable(images: list[LocalImage], keep: set[str]) -> list[LocalImage]:
    """Images to remove: not kept, and not the base of a kept image (however deep)."""
    bases = {i.id: i.built.base for i in images}
    held = set(keep)
    frontier = list(keep)
    while frontier:  # bounded: each recorded ID enters held at most once
        base = bases.get(frontier.pop())
        if base is not None and base not in held:
            held.add(base)
            frontier.append(base)
    return [i for i in images if i.id not in held]


def remove_image(image_id: str) -> str | None:
    """Remove one image (never forced); None when removed, else podman's reason."""
    if not HEX64.fullmatch(image_id):
        raise WriterpoolError("usage_invalid", "not an image id")
    argv = ["podman", "rmi", "--", image_id]
    try:
        done = run(argv, env=podman_env(), timeout=TIMEOUT, check=False)
    except CommandFailed as exc:
        raise WriterpoolError("podman_unavailable", "podman could not remove an image") from exc
    if done.returncode == 0:
        return None
    return last_line(done.stderr, "refused")[:200]
