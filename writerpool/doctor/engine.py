"""Checks over what `podman info` reports: OCI runtime, storage, network, cgroups."""

from __future__ import annotations

import stat

from writerpool.doctor.host import BOOTSTRAP
from writerpool.doctor.model import CheckContext, CheckResult
from writerpool.runtime.info import DeviceFacts, HostFacts, PodmanInfo, version_tuple

# crun's own words when it refuses a hybrid cgroup layout (crun 1.8.1 on Debian 12).
CRUN_HYBRID = "cgroups in hybrid mode not supported"
PASTA_SINCE = (4, 4, 0)
TUN = "/dev/net/tun"


def oci_runtime(ctx: CheckContext) -> list[CheckResult]:
    info = ctx.facts.podman_info
    if info is None:
        return []  # podman_usable reports why
    runtime = info.host.oci_runtime
    if runtime is None:
        return [
            CheckResult(
                "oci_runtime",
                "error",
                "podman",
                "podman info names no OCI runtime",
                f"as root: apt-get install runc (or run {BOOTSTRAP})",
                blocking=True,
            )
        ]
    kind, trial = runtime.kind, ctx.facts.runtime_trial
    if trial is not None and not trial.ok:
        if CRUN_HYBRID in trial.stderr:
            return [_crun_hybrid(kind, tried=True)]
        return [
            CheckResult(
                "oci_runtime",
                "error",
                "podman",
                f"{kind} could not run a trivial container: {trial.stderr or 'no message'}",
                "run `podman run --rm IMAGE true` as this user to see the whole error; "
                f"{BOOTSTRAP} fixes the known host problems",
                blocking=True,
                data={"runtime": kind, "tried": True},
            )
        ]
    if trial is None and kind == "crun" and _hybrid(ctx.facts, info):
        return [_crun_hybrid(kind, tried=False)]
    how = "ran a trivial container" if trial else "not tried (no pinned writer image to run)"
    return [
        CheckResult(
            "oci_runtime",
            "ok",
            "podman",
            f"OCI runtime {kind}: {how}",
            data={"runtime": kind, "tried": trial is not None},
        )
    ]


def _hybrid(facts: HostFacts, info: PodmanInfo) -> bool:
    if facts.cgroups != "unknown":
        return facts.cgroups == "hybrid"
    return info.host.cgroup_version == "v1"


def _crun_hybrid(kind: str, *, tried: bool) -> CheckResult:
    seen = "fails" if tried else "will fail"
    return CheckResult(
        "oci_runtime",
        "error",
        "podman",
        f"crun {seen} every container on this host's hybrid cgroup layout "
        f'("{CRUN_HYBRID}"); runc works here',
        'set runtime = "runc" under [engine] in ~/.config/containers/containers.conf '
        f"(apt-get install runc if it is missing), or run {BOOTSTRAP} as root",
        blocking=True,
        data={"runtime": kind, "tried": tried},
    )


def storage_driver(ctx: CheckContext) -> list[CheckResult]:
    info = ctx.facts.podman_info
    if info is None:
        return []
    driver = info.store.graph_driver_name
    if driver == "vfs":
        return [
            CheckResult(
                "storage_driver",
                "warning",
                "podman",
                "storage driver vfs: every container copies the whole image (seconds per session "
                "instead of a fraction of one)",
                'set driver = "overlay" under [storage] in ~/.config/containers/storage.conf, then '
                "`podman system reset` (it deletes this user's images and containers, so rebuild "
                f"with writerpool image build); {BOOTSTRAP} does both",
                data={"driver": driver},
            )
        ]
    return [
        CheckResult(
            "storage_driver", "ok", "podman", f"storage driver {driver}", data={"driver": driver}
        )
    ]


def network_helper_name(facts: HostFacts) -> str | None:
    """The user-mode network a writer would get: pasta where Podman supports it and it is
    installed, else slirp4netns; None when neither is usable."""
    info = facts.podman_info
    if info is None:
        return None
    if version_tuple(info.version.version) >= PASTA_SINCE and _pasta(facts, info):
        return "pasta"
    if (info.host.slirp4netns and info.host.slirp4netns.executable) or facts.binary(
        "slirp4netns"
    ).path:
        return "slirp4netns"
    return None


def _pasta(facts: HostFacts, info: PodmanInfo) -> bool:
    return bool((info.host.pasta and info.host.pasta.executable) or facts.binary("pasta").path)


def network_helper(ctx: CheckContext) -> list[CheckResult]:
    info = ctx.facts.podman_info
    if info is None:
        return []
    version = info.version.version
    helper = network_helper_name(ctx.facts)
    data: dict[str, object] = {"helper": helper, "podman": version}
    if helper == "pasta":
        return [
            CheckResult(
                "network_helper",
                "ok",
                "podman",
                "pasta provides the user-mode network (not limited)",
                data=data,
            )
        ]
    if version_tuple(version) < PASTA_SINCE:
        pasta = f"pasta is missing: Podman {version} has no pasta network (it needs 4.4)"
    else:
        pasta = "pasta is not installed"
    if helper == "slirp4netns":
        return [
            CheckResult(
                "network_helper",
                "ok",
                "podman",
                f"{pasta}; slirp4netns is used (not limited)",
                data=data,
            )
        ]
    return [
        CheckResult(
            "network_helper",
            "warning",
            "podman",
            f"{pasta} and slirp4netns is missing: only --network none works",
            "as root: apt-get install slirp4netns (or passt, for pasta with Podman 4.4 or newer)",
            data=data,
        )
    ]


def tun_device(ctx: CheckContext) -> list[CheckResult]:
    facts = ctx.facts
    helper = network_helper_name(facts)
    if helper is None:
        return []  # no user-mode network to serve
    tun = facts.tun
    if tun is None or not stat.S_ISCHR(tun.mode):
        return [
            CheckResult(
                "tun_device",
                "error",
                "host",
                f"the TUN device is missing, so {helper} cannot start",
                f"as root: mkdir -p /dev/net && mknod {TUN} c 10 200 && chmod 0666 {TUN}",
                blocking=True,
                data={"helper": helper},
            )
        ]
    mode = f"{stat.S_IMODE(tun.mode):04o}"
    if not _read_write(facts, tun):
        return [
            CheckResult(
                "tun_device",
                "error",
                "host",
                f"the TUN device is mode {mode}: {helper} cannot open it as {facts.user}",
                f"as root: chmod 0666 {TUN} (the usual mode), or run {BOOTSTRAP}",
                blocking=True,
                data={"helper": helper, "mode": mode},
            )
        ]
    return [
        CheckResult(
            "tun_device",
            "ok",
            "host",
            f"the TUN device is usable (mode {mode})",
            data={"helper": helper, "mode": mode},
        )
    ]


def _read_write(facts: HostFacts, tun: DeviceFacts) -> bool:
    if facts.uid == 0:
        return True
    if tun.owner == facts.uid:
        return tun.mode & 0o600 == 0o600
    if tun.group in facts.gids:
        return tun.mode & 0o060 == 0o060
    return tun.mode & 0o006 == 0o006


def cgroup_limits(ctx: CheckContext) -> list[CheckResult]:
    facts = ctx.facts
    if facts.podman_info is None:
        return []
    missing = facts.missing_limit_controllers()
    layout = facts.cgroups if facts.cgroups != "unknown" else facts.podman_info.host.cgroup_version
    if not missing:
        return [
            CheckResult(
                "cgroup_limits",
                "ok",
                "host",
                f"cgroups {layout}: memory, CPU and pids limits apply",
                data={"layout": layout, "limits": True},
            )
        ]
    if not facts.cgroup_v2:
        return [
            CheckResult(
                "cgroup_limits",
                "warning",
                "host",
                f"cgroups {layout} (not unified v2): Podman ignores memory, CPU and pids limits of "
                "rootless containers, so sessions run unlimited",
                "boot with the unified cgroup v2 hierarchy (kernel command line "
                "systemd.unified_cgroup_hierarchy=1); until then no limit applies",
                data={"layout": layout, "limits": False},
            )
        ]
    return [
        CheckResult(
            "cgroup_limits",
            "warning",
            "host",
            f"cgroups v2, but the user may not use the {', '.join(missing)} controller(s): "
            "those limits are ignored",
            "delegate the controllers to users (systemd: Delegate=cpu cpuset io memory pids for "
            "user@.service)",
            data={"layout": layout, "limits": False, "missing": list(missing)},
        )
    ]
