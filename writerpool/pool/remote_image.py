"""The writer image on a configured host: `image transfer --host` and `image prune --host`."""

from __future__ import annotations

from collections.abc import Callable

from writerpool.config.hosts import Host
from writerpool.config.models import load_config
from writerpool.config.paths import Paths
from writerpool.errors import UsageError, WriterpoolError
from writerpool.pool.image_prune import images_in_use
from writerpool.report import Report
from writerpool.runtime.image import load_pin
from writerpool.runtime.image_prune import KIND_ORDER
from writerpool.runtime.image_transfer import (
    remote_images,
    remove_remote_image,
    transfer_image,
)
from writerpool.runtime.podman import PodmanHost
from writerpool.runtime.remote import connect
from writerpool.state.images import load_record


def configured_host(paths: Paths, name: str) -> Host:
    host = load_config(paths).config.hosts.get(name)
    if host is None:
        raise UsageError(f"no [hosts.{name}] in the configuration", code="host_unknown")
    return host


def transfer_to_host(paths: Paths, name: str, say: Callable[[str], None]) -> Report:
    """Copy the pinned writer image to host `name`, verified by its ID."""
    host = configured_host(paths, name)
    pin = load_pin(paths)
    if pin is None:
        raise WriterpoolError(
            "image_unavailable", "no writer image is pinned; run `writerpool image build`"
        )
    target = f"host/{name}"

    def progress(sent: int, total: int) -> None:
        say(f"image: {sent // 1_000_000} of about {total // 1_000_000} MB sent to {name}")

    with connect(name, host) as remote:
        copied = transfer_image(PodmanHost(), remote, pin.image_id, progress)
    report = Report(
        "image transfer", data={"host": name, "imageId": pin.image_id, "copied": copied}
    )
    short = pin.image_id[:12]
    if copied:
        report.add("image_transferred", "ok", target, f"copied {short} to {name}; same ID there")
    else:
        report.add("image_present", "ok", target, f"{name} already holds {short}")
    return report


def prune_host(paths: Paths, name: str, apply: bool) -> Report:
    """Plan (or remove) the images writerpool built that host `name` holds and nothing uses."""
    host = configured_host(paths, name)
    record = load_record(paths)
    keep = images_in_use(paths) | record.found_ids()  # found ones: maybe another install's
    recorded = sorted(record.images, key=lambda b: KIND_ORDER[b.kind])
    report = Report("image prune", data={"host": name})
    target = f"host/{name}"
    with connect(name, host) as remote:
        present = remote_images(remote)
        old = [b for b in recorded if b.id in present and b.id not in keep]
        for built in old:  # bounded by the record (images writerpool built)
            what = f"{built.kind} image {built.id[:12]} ({present[built.id] // 1_000_000} MB)"
            if not apply:
                report.add("image_prune_planned", "planned", target, f"would remove {what}")
                continue
            refusal = remove_remote_image(remote, built.id)
            if refusal is None:
                report.add("image_removed", "ok", target, f"removed {what} from {name}")
            else:
                report.add("image_remove_refused", "warning", target, f"kept {what}: {refusal}")
    if not old:
        report.add(
            "image_prune_nothing", "ok", target, f"{name} holds no unused image writerpool built"
        )
    report.data.update(kept=sorted(keep), prunable=[b.id for b in old])
    return report
