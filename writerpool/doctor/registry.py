"""The ordered list of checks, how they run, and which failures block provisioning."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from writerpool.config.models import load_config
from writerpool.config.modes import load_modes
from writerpool.config.network import network_info
from writerpool.config.paths import Paths
from writerpool.doctor.configured import (
    config_file,
    execution_modes,
    profile_providers,
    session_placement,
    workspace_checkouts,
    workspace_modes,
)
from writerpool.doctor.engine import (
    cgroup_limits,
    network_helper,
    oci_runtime,
    storage_driver,
    tun_device,
)
from writerpool.doctor.host import (
    idmap_helpers,
    pi_node,
    podman_usable,
    rootless_user,
    server_descriptors,
    subid_ranges,
)
from writerpool.doctor.image import read_pin, writer_image
from writerpool.doctor.lease import lease_dir
from writerpool.doctor.model import Check, CheckContext, CheckResult
from writerpool.doctor.services import podman_api
from writerpool.errors import WriterpoolError
from writerpool.runtime.info import HostFacts

BUILTIN_CHECKS: tuple[Check, ...] = (
    podman_usable,
    podman_api,
    rootless_user,
    subid_ranges,
    idmap_helpers,
    oci_runtime,
    storage_driver,
    network_helper,
    tun_device,
    cgroup_limits,
    writer_image,
    pi_node,
    config_file,
    execution_modes,
    workspace_checkouts,
    workspace_modes,
    session_placement,
    profile_providers,
    lease_dir,
    server_descriptors,
)

# Every id the built-in checks report (docs/doctor.md documents each).
CHECK_IDS = (
    "podman_usable",
    "podman_api",
    "rootless_user",
    "subid_ranges",
    "idmap_helpers",
    "oci_runtime",
    "storage_driver",
    "network_helper",
    "tun_device",
    "cgroup_limits",
    "writer_image",
    "pi_node",
    "config_file",
    "execution_modes",
    "workspace_checkout",
    "workspace_mode",
    "session_placement",
    "profile_provider",
    "lease_dir",
    "server_descriptors",
)


# Checks that matter only to a writer with a user-mode network.
NETWORK_CHECKS = frozenset({"network_helper", "tun_device"})


def build_context(paths: Paths, facts: HostFacts) -> CheckContext:
    """Load configuration, modes and the image pin once, keeping failures as findings."""
    loaded = config_error = modes = modes_error = None
    try:
        loaded = load_config(paths)
    except WriterpoolError as exc:
        config_error = exc
    if loaded is not None:
        try:
            modes = load_modes(paths)
        except WriterpoolError as exc:
            modes_error = exc
    pin, pin_error = read_pin(paths)
    return CheckContext(paths, facts, loaded, config_error, modes, modes_error, pin, pin_error)


def run_checks(paths: Paths, facts: HostFacts, extra: Sequence[Check] = ()) -> list[CheckResult]:
    """Every built-in check, then `extra` (checks other parts of writerpool own, such as
    pool/status/checks.py's: doctor never imports them), in order, with the same context."""
    ctx = build_context(paths, facts)
    results: list[CheckResult] = []
    for check in (*BUILTIN_CHECKS, *extra):
        results.extend(check(ctx))
    return results


def blocking_failures(
    results: Sequence[CheckResult],
    *,
    workspace: str | None = None,
    profiles: Collection[str] = (),
    network: str | None = None,
) -> list[CheckResult]:
    """The errors that stop container provisioning (`doctor_failed`, one per result):
    host-wide blocking errors, plus those of the named workspace and profiles (another
    host's, `host/NAME`, never block this machine's). With
    a limited network (provider, none), user-mode network problems do not block."""
    subjects = {f"profile/{name}" for name in profiles}
    if workspace is not None:
        subjects.add(f"workspace/{workspace}")
    chosen = []
    for result in results:
        if result.severity != "error" or not result.blocking:
            continue
        if network is not None and network_info(network).limited and result.id in NETWORK_CHECKS:
            continue
        scoped = result.subject.startswith(("workspace/", "profile/", "writer/", "host/"))
        if scoped and result.subject not in subjects:
            continue
        chosen.append(result)
    return chosen
