"""Gather a HostFacts snapshot for doctor: binaries, Podman, images, the runtime trial,
the API socket, id ranges, devices and cgroups; a gate may reuse a recent passing probe
of Podman (runtime/probe_record.py)."""

from __future__ import annotations

import os
import pwd
import time
from collections.abc import Sequence

from pydantic import ValidationError

from writerpool.errors import WriterpoolError
from writerpool.proc import CommandFailed
from writerpool.runtime.info import (
    MOUNTS_FILE,
    PROBED_BINARIES,
    SUBGID_FILE,
    SUBUID_FILE,
    TUN_DEVICE,
    HostFacts,
    PodmanInfo,
    PodmanVersion,
    RuntimeTrial,
    cgroup_layout,
    probe_api,
    probe_binary,
    probe_device,
    probe_podman,
    read_text,
    run_trial,
)
from writerpool.runtime.podman import PodmanEngine
from writerpool.runtime.probe_record import Probe, probe_key, recent_probe, save_probe


def _image_exists(podman: PodmanEngine, image_id: str) -> bool:
    try:
        return podman.image_exists(image_id)
    except (CommandFailed, WriterpoolError):
        return False


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _reused(key: str) -> tuple[PodmanVersion, PodmanInfo, Probe] | None:
    """Podman's version and info from a recent passing probe, if one holds."""
    probe = recent_probe(key)
    if probe is None:
        return None
    try:
        version = PodmanVersion.model_validate(probe.version)
        info = PodmanInfo.model_validate(probe.info)
    except ValidationError:
        return None
    return version, info, probe


def _record(key: str, version: PodmanVersion, info: PodmanInfo,
            trial: RuntimeTrial | None, at: float) -> None:  # fmt: skip
    if trial is not None and not trial.ok:
        return
    save_probe(key, Probe(
        version=version.model_dump(mode="json", by_alias=True),
        info=info.model_dump(mode="json", by_alias=True),
        trial_image=trial.image_id if trial is not None else None,
        at=at,
    ))  # fmt: skip


def gather_host_facts(
    image_ids: Sequence[str] = (), trial_image: str | None = None, *, reuse: bool = False
) -> HostFacts:
    """Probe this host as the current user. A trivial container of trial_image is run
    only when that image exists and the user is not root. With `reuse`, Podman's version,
    info and a passed trial of the same image come from a recent passing probe when one
    holds; a probe that passes is recorded either way."""
    uid = os.getuid()
    binaries = {name: probe_binary(name) for name in PROBED_BINARIES}
    podman = PodmanEngine()
    version = info = error = None
    images: dict[str, bool] = {}
    trial = reused = None
    key, probed_at = probe_key(podman.binary), time.time()
    if binaries["podman"].path is not None or "WRITERPOOL_PODMAN" in os.environ:
        reused = _reused(key) if reuse else None
        if reused is not None:
            version, info, probe = reused
            probed_at = probe.at
        else:
            version, info, error = probe_podman(podman)
    api_probed, api_error = False, None
    fresh = reused is None  # whether anything of Podman was probed now, to be recorded
    if info is not None:
        images = {image: _image_exists(podman, image) for image in dict.fromkeys(image_ids)}
        if trial_image and images.get(trial_image) and uid != 0:
            if reused is not None and reused[2].trial_image == trial_image:
                trial = RuntimeTrial(trial_image, True)
            else:
                trial, fresh = run_trial(podman, trial_image), True
        if uid != 0:
            api_probed, api_error = True, probe_api(podman)
    if fresh and version is not None and info is not None:
        _record(key, version, info, trial, probed_at)
    return HostFacts(
        uid=uid,
        user=_user_name(uid),
        gids=frozenset(os.getgroups()) | {os.getgid()},
        binaries=binaries,
        podman_version=version,
        podman_info=info,
        podman_error=error,
        subuid=read_text(SUBUID_FILE),
        subgid=read_text(SUBGID_FILE),
        tun=probe_device(TUN_DEVICE),
        cgroups=cgroup_layout(read_text(MOUNTS_FILE) or ""),
        images=images,
        runtime_trial=trial,
        api_probed=api_probed,
        api_error=api_error,
    )
