"""The writer image: pinned by `writerpool image build`, present in Podman's storage."""

from __future__ import annotations

from writerpool.config.paths import Paths
from writerpool.doctor.model import CheckContext, CheckResult, ImagePin
from writerpool.errors import WriterpoolError
from writerpool.runtime.image import load_pin

BUILD = "run writerpool image build"


def read_pin(paths: Paths) -> tuple[ImagePin | None, str | None]:
    """(pin, None), (None, None) when nothing is pinned yet, or (None, why) when the pin
    cannot be used."""
    try:
        pin = load_pin(paths)
    except WriterpoolError as exc:
        return None, exc.message
    return (ImagePin(pin.image_id) if pin is not None else None), None


def writer_image(ctx: CheckContext) -> list[CheckResult]:
    if ctx.pin_error is not None:
        return [
            CheckResult(
                "writer_image",
                "error",
                "image",
                ctx.pin_error,
                f"{BUILD} (it rewrites the pin)",
                blocking=True,
            )
        ]
    if ctx.pin is None:
        return [
            CheckResult(
                "writer_image",
                "warning",
                "image",
                "no writer image is pinned yet",
                "run writerpool doctor --registry (the build installs pi from the npm "
                f"registry), then {BUILD.removeprefix('run ')}",
            )
        ]
    image_id = ctx.pin.image_id
    short = image_id[:12]
    if ctx.facts.podman_info is None:
        return []  # podman_usable reports why nothing can be looked up
    if not ctx.facts.images.get(image_id, False):
        return [
            CheckResult(
                "writer_image",
                "error",
                "image",
                f"the pinned writer image {short} is not in Podman's storage",
                f"{BUILD} (`podman system reset` deletes images; the build repins)",
                blocking=True,
                data={"imageId": image_id},
            )
        ]
    return [
        CheckResult(
            "writer_image",
            "ok",
            "image",
            f"writer image {short} present, as pinned",
            data={"imageId": image_id},
        )
    ]
