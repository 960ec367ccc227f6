"""Old writer images: the ones writerpool built that nothing uses any more.

Kept: the pinned image, every image a writer's state or a stored mode names, and the
root file system image the pinned image was built from (a rebuild reuses it). Podman
refuses to remove an image a container uses; that is reported, never forced.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, run
from writerpool.runtime.image import HEX64, LABEL_INPUTS, LABEL_ROOTFS
from writerpool.runtime.podman import podman_env

TIMEOUT = 120.0


class LocalImage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    id: str = Field(alias="Id", pattern=HEX64.pattern)
    labels: dict[str, str] | None = Field(default=None, alias="Labels")
    size: int = Field(default=0, alias="Size")

    @property
    def kind(self) -> str:
        """"writer" (a built writer image) or "rootfs" (the base it is built from)."""
        return "writer" if LABEL_INPUTS in (self.labels or {}) else "rootfs"

    @property
    def rootfs(self) -> str | None:
        return (self.labels or {}).get(LABEL_ROOTFS)


def writerpool_images() -> list[LocalImage]:
    """Every local image carrying a writerpool label (writer images carry both)."""
    argv = ["podman", "images", "--format", "json", "--filter", f"label={LABEL_ROOTFS}"]
    try:
        done = run(argv, env=podman_env(), timeout=TIMEOUT)
    except CommandFailed as exc:
        raise WriterpoolError("podman_unavailable", "podman could not list images") from exc
    try:
        data = json.loads(done.out or "[]") or []
        images = [LocalImage.model_validate(item) for item in data]
    except (ValueError, ValidationError) as exc:
        raise WriterpoolError("podman_unavailable", "podman printed unexpected image JSON") from exc
    return list({i.id: i for i in images}.values())


def prunable(images: list[LocalImage], keep: set[str]) -> list[LocalImage]:
    """Images to remove, writer images before the root file systems they are built on."""
    kept_rootfs = {i.rootfs for i in images if i.id in keep and i.rootfs}
    out = [
        i for i in images
        if i.id not in keep and not (i.kind == "rootfs" and i.rootfs in kept_rootfs)
    ]  # fmt: skip
    return sorted(out, key=lambda i: (i.kind != "writer", i.id))


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
    last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["refused"]
    return last[0][:200]
