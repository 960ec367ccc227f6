"""`writerpool image prune [--apply]`: plan, or remove, images writerpool built that
nothing uses.

Only the IDs images.json recorded at build and derive are candidates. Kept: the pinned
image, every image a writer's state or a stored mode names, and the images those were
built on (a rebuild reuses the root file system; a derived image needs its writer image).
"""

from __future__ import annotations

from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.listing import writer_names
from writerpool.report import Report
from writerpool.runtime.image import HEX64, load_pin
from writerpool.runtime.image_prune import (
    LocalImage,
    prunable,
    recorded_images,
    remove_image,
    tagged_by_writerpool,
)
from writerpool.state.images import forget, load_record, record_built, record_file
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


def owned_images(paths: Paths) -> list[LocalImage]:
    """The recorded images still in local storage; IDs gone meanwhile leave the record.

    Without a record (builds made before it existed), it is started once from the images
    carrying writerpool's own tags.
    """
    if not record_file(paths).exists():
        record_built(paths, tagged_by_writerpool())
    found, gone = recorded_images(load_record(paths))
    forget(paths, gone)
    return found


def remove_owned(paths: Paths, images: list[LocalImage], report: Report) -> int:
    """Remove images in order; report each; return the bytes freed."""
    freed = 0
    removed = []
    for image in images:
        refusal = remove_image(image.id)
        if refusal is None:
            freed += image.size
            removed.append(image.id)
            report.add("image_removed", "ok", TARGET, f"removed {image.describe()}")
        else:
            report.add("image_remove_refused", "warning", TARGET,
                       f"kept {image.describe()}: {refusal}")  # fmt: skip
    forget(paths, removed)
    return freed


def prune_images(paths: Paths, apply: bool) -> Report:
    report = Report("image prune")
    keep = images_in_use(paths)
    found = owned_images(paths)
    old = prunable(found, keep)
    freed = 0
    if apply:
        freed = remove_owned(paths, old, report)
    else:
        for image in old:
            report.add("image_prune_planned", "planned", TARGET,
                       f"would remove {image.describe()}")  # fmt: skip
    if not old:
        report.add("image_prune_nothing", "ok", TARGET,
                   f"no unused image writerpool built ({len(found)} in use or kept)")  # fmt: skip
    report.data.update(
        kept=sorted(keep),
        prunable=[{"id": i.id, "kind": i.kind, "size": i.size} for i in old],
        freedBytes=freed,
    )
    return report
