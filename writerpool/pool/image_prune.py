"""`writerpool image prune [--apply]`: plan, or remove, writer images nothing uses."""

from __future__ import annotations

from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.listing import writer_names
from writerpool.report import Report
from writerpool.runtime.image import HEX64, load_pin
from writerpool.runtime.image_prune import prunable, remove_image, writerpool_images
from writerpool.state.writer import load_state

TARGET = "image/writer"


def images_in_use(paths: Paths) -> set[str]:
    """The pinned image and every image a writer's state or a stored mode names."""
    keep = set()
    pin = load_pin(paths)
    if pin is not None:
        keep.add(pin.image_id)
    for entry in load_modes(paths).workspaces.values():
        if entry.container is not None and HEX64.fullmatch(entry.container.image):
            keep.add(entry.container.image)
    for _, name in writer_names(paths):
        try:
            state = load_state(paths.writer_dir(name))
        except WriterpoolError:
            continue  # its image cannot be known; prune keeps what the pin and modes name
        if state is not None and HEX64.fullmatch(state.image):
            keep.add(state.image)
    return keep


def prune_images(paths: Paths, apply: bool) -> Report:
    report = Report("image prune")
    keep = images_in_use(paths)
    found = writerpool_images()
    old = prunable(found, keep)
    freed = 0
    for image in old:
        short = image.id[:12]
        megabytes = image.size // 1_000_000
        if not apply:
            report.add("image_prune_planned", "planned", TARGET,
                       f"would remove {image.kind} image {short} ({megabytes} MB)")  # fmt: skip
            continue
        refusal = remove_image(image.id)
        if refusal is None:
            freed += image.size
            report.add("image_removed", "ok", TARGET,
                       f"removed {image.kind} image {short} ({megabytes} MB)")  # fmt: skip
        else:
            report.add("image_remove_refused", "warning", TARGET,
                       f"kept {image.kind} image {short}: {refusal}")  # fmt: skip
    if not old:
        report.add("image_prune_nothing", "ok", TARGET,
                   f"no unused writer image ({len(found)} in use or kept)")  # fmt: skip
    report.data.update(
        kept=sorted(keep),
        prunable=[{"id": i.id, "kind": i.kind, "size": i.size} for i in old],
        freedBytes=freed,
    )
    return report
