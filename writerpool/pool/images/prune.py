"""`writerpool image prune [--apply]`: plan, or remove, images this install built that
nothing uses.

Only the IDs this install's images.json recorded at build and derive are candidates,
never images selected by tag or label: every install of an account shares Podman's
storage, and another install's pinned image carries the same tags. Without a record,
nothing is removed. Kept: the pinned image, every image a writer's state or a stored
mode names, the images a build found and reused rather than built, and the images those
were built on (a rebuild reuses the root file system; a derived image needs its writer
image).
"""

from __future__ import annotations

from writerpool.config.modes import load_modes
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.pool.provision.listing import writer_names
from writerpool.report import Report
from writerpool.runtime.image import HEX64, load_pin
from writerpool.runtime.image_prune import (
    LocalImage,
    prunable,
    recorded_images,
    remove_image,
)
from writerpool.state.images import forget, load_record, record_file
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


NO_RECORD = (
    "this install has no record of images it built ({file}), so {what} removes none: "
    "images are chosen only by the IDs `image build` and `image derive` record, never by "
    "tag (other installs of this account share Podman's storage and its tags)"
)
NO_RECORD_REMEDY = (
    "remove an image you know no install uses with `podman rmi ID`; builds from now on are recorded"
)


def owned_images(paths: Paths) -> list[LocalImage] | None:
    """The recorded images still in local storage (None: this install has no record);
    IDs gone meanwhile leave the record."""
    if not record_file(paths).exists():
        return None
    found, gone = recorded_images(load_record(paths))
    forget(paths, gone)
    return found


def built_here(images: list[LocalImage]) -> list[LocalImage]:
    """The images this install built (not those a build found by tag and reused)."""
    return [i for i in images if not i.built.found]


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
    if found is None:
        report.add("image_record_missing", "warning", TARGET,
                   NO_RECORD.format(file=record_file(paths).name, what="prune"),
                   remedy=NO_RECORD_REMEDY)  # fmt: skip
        report.data.update(kept=sorted(keep), prunable=[], freedBytes=0)
        return report
    keep |= {i.id for i in found if i.built.found}
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
