"""The writer image on a host over SSH, by the same ID: `image transfer --host` (`podman
save` here, streamed into `podman load` on the host through its connection, then verified
by ID) and `image prune --host` (the images writerpool built that the host holds and
nothing uses)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from typing import IO

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed, Process, spawn, stop, wait_or_stop
from writerpool.report import Report
from writerpool.runtime.hosts import configured_host
from writerpool.runtime.image import HEX64, load_pin
from writerpool.runtime.image_prune import KIND_ORDER
from writerpool.runtime.podman import PodmanEngine, podman_env
from writerpool.runtime.remote import RemotePodman, connect
from writerpool.state.images import load_record

CHUNK = 1024 * 1024
# Progress is reported after each this many bytes (and at the end).
PROGRESS_EVERY = 64 * 1024 * 1024
LOAD_SECONDS = 900.0
Progress = Callable[[int, int], None]  # (bytes sent, bytes expected)


def _size(local: PodmanEngine, image_id: str) -> int:
    found = local.cli(["image", "inspect", "--format", "{{.Size}}", image_id], timeout=30)
    return int(found.out.strip() or 0)


def remote_image_id(remote: RemotePodman, image_id: str) -> str | None:
    """The full ID the host stores for `image_id`, or None when it has no such image."""
    found = remote.cli(["image", "inspect", "--format", "{{.Id}}", image_id], timeout=60,
                       check=False)  # fmt: skip
    return found.out.strip() if found.returncode == 0 else None


def _relay(source: IO[bytes], sink: IO[bytes], total: int, progress: Progress) -> int:
    """Copy source to sink; bounded by the archive's size, one CHUNK per round."""
    sent = reported = 0
    while chunk := source.read(CHUNK):
        sink.write(chunk)
        sent += len(chunk)
        if sent - reported >= PROGRESS_EVERY:
            progress(sent, total)
            reported = sent
    sink.close()
    progress(sent, total)
    return sent


def _stderr(errors: IO[bytes]) -> str:
    errors.seek(0)
    lines = errors.read(16384).decode(errors="replace").strip().splitlines()
    return lines[-1][:200] if lines else "no message"


def transfer_image(
    local: PodmanEngine, remote: RemotePodman, image_id: str, progress: Progress
) -> bool:
    """Make the host hold `image_id`; False when it already did. Raises
    `image_transfer_failed` when the copy fails or arrives under another ID."""
    if remote_image_id(remote, image_id) == image_id:
        return False
    total = _size(local, image_id)
    save_argv = [local.binary, "image", "save", "--format", "docker-archive", image_id]
    load_argv = [remote.binary, *remote.url_args(), "image", "load", "--quiet"]
    with tempfile.TemporaryFile() as save_err, tempfile.TemporaryFile() as load_err:
        save = spawn(save_argv, env=podman_env(), stdin_pipe=False, stderr_to=save_err.fileno())
        load = spawn(load_argv, env=podman_env(), stderr_to=load_err.fileno())
        try:
            _pump(save, load, total, progress)
        finally:
            save_rc, load_rc = stop(save, grace=30), _finish(load)
        # The load first: when it fails, the save was stopped because of it.
        if load_rc != 0:
            remote.raise_if_gone(CommandFailed(load_argv, load_rc, b"", b""))
            raise WriterpoolError(
                "image_transfer_failed", f"podman load on {remote.host.name}: {_stderr(load_err)}"
            )
        if save_rc != 0:
            raise WriterpoolError("image_transfer_failed", f"podman save: {_stderr(save_err)}")
    arrived = remote_image_id(remote, image_id)
    if arrived != image_id:
        raise WriterpoolError(
            "image_transfer_failed",
            f"host {remote.host.name} holds no image with the ID {image_id[:12]} after the copy",
        )
    return True


def _pump(save: Process, load: Process, total: int, progress: Progress) -> None:
    assert save.stdout is not None and load.stdin is not None
    # A load that ends early breaks the pipe: its exit code and stderr say why. `save`
    # is stopped then, or it would wait forever to write what nobody reads.
    try:
        _relay(save.stdout, load.stdin, total, progress)
    except BrokenPipeError:
        stop(save, grace=5)
    wait_or_stop(save, LOAD_SECONDS)


def _finish(load: Process) -> int:
    """Wait for `podman load` to import what it was sent (minutes at most)."""
    if load.stdin is not None and not load.stdin.closed:
        load.stdin.close()
    return wait_or_stop(load, LOAD_SECONDS)


def remote_images(remote: RemotePodman) -> dict[str, int]:
    """Every image on the host (intermediate ones too): full ID -> size in bytes."""
    found = remote.cli(["images", "--all", "--format", "json"], timeout=120)
    try:
        listed = json.loads(found.out or "[]")
        return {str(i["Id"]): int(i.get("Size", 0)) for i in listed if HEX64.fullmatch(i["Id"])}
    except (ValueError, KeyError, TypeError) as exc:
        raise WriterpoolError(
            "command_failed", f"`podman images` on host {remote.host.name} did not parse"
        ) from exc


def remove_remote_image(remote: RemotePodman, image_id: str) -> str | None:
    """Remove one image from the host; Podman's refusal (a container uses it) as text."""
    done = remote.cli(["image", "rm", "--", image_id], timeout=120, check=False)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1][:200] if lines else f"podman image rm exited {done.returncode}"


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
        copied = transfer_image(PodmanEngine(), remote, pin.image_id, progress)
    report = Report(
        "image transfer", data={"host": name, "imageId": pin.image_id, "copied": copied}
    )
    short = pin.image_id[:12]
    if copied:
        report.add("image_transferred", "ok", target, f"copied {short} to {name}; same ID there")
    else:
        report.add("image_present", "ok", target, f"{name} already holds {short}")
    return report


def prune_host(paths: Paths, name: str, keep: set[str], apply: bool) -> Report:
    """Plan (or remove) the images writerpool built that host `name` holds and nothing
    uses (`keep`: the images in use, pool/images/prune.py images_in_use)."""
    host = configured_host(paths, name)
    record = load_record(paths)
    keep = keep | record.found_ids()  # found ones: maybe another install's
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
