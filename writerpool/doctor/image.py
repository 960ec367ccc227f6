"""The writer image: pinned by `writerpool image build`, present in Podman's storage."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.doctor.model import CheckContext, CheckResult, ImagePin

BUILD = "run writerpool image build"


class _PinFile(BaseModel):
    # The pin records more (inputs, build time); doctor needs only its id.
    model_config = ConfigDict(extra="ignore", frozen=True)

    schema_version: Literal[1] = Field(alias="schemaVersion")
    image_id: str = Field(alias="imageId", pattern=r"^[0-9a-f]{64}$")


def read_pin(path: Path) -> tuple[ImagePin | None, str | None]:
    """(pin, None), (None, None) when there is no pin yet, or (None, why) when it is bad."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"the image pin is unreadable ({exc.strerror})"
    try:
        pin = _PinFile.model_validate_json(raw)
    except ValidationError:
        return None, "the image pin is not a valid version 1 pin"
    return ImagePin(pin.image_id), None


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
                "writer_image", "warning", "image", "no writer image is pinned yet", f"{BUILD}"
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
