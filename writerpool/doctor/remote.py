"""Doctor for each `[hosts.NAME]`: reachable with its pinned key, rootless Podman and its
version, the API service, podman and python3 for the SSH user, cgroup limits, the pinned
image by ID, free disk.

The checks are pure over RemoteFacts (runtime/remote_info.py); `remote_hosts` probes
every configured host once, in config order (bounded by the [hosts] tables)."""

from __future__ import annotations

from writerpool.doctor.host import CGROUP_V1_DEPRECATED
from writerpool.doctor.model import CheckContext, CheckResult
from writerpool.runtime.info import LIMIT_CONTROLLERS, version_tuple
from writerpool.runtime.remote_info import RemoteFacts, probe_host

# Below this much free space in the host's container storage, doctor warns: a writer
# image and a few clones need about this much.
LOW_DISK_BYTES = 2 * 1024**3
API_REMEDY = (
    "on the host, start the API service as the SSH user: `systemctl --user enable --now "
    "podman.socket` with `loginctl enable-linger USER`, or `podman system service --time=0 "
    "unix://PATH` for the socket path in the host's url"
)
REACH_REMEDY = {
    "host_key_mismatch": "compare the key the host presents with its administrator; replace "
    "the line in the host's known_hosts file only once the new key is trusted",
    "host_key_unpinned": "add the host's key to its known_hosts file (from its administrator, "
    "or ssh-keyscan on a network you trust)",
    "host_config_invalid": "check the host's identity and known_hosts paths in config.toml, "
    "and that the identity's public key is in the SSH user's authorized_keys",
    "writer_host_unreachable": "check that the host is up, its sshd listens on the url's "
    "address and port, and no firewall drops the connection",
}


def remote_hosts(ctx: CheckContext) -> list[CheckResult]:
    if ctx.loaded is None:
        return []
    pin = ctx.pin.image_id if ctx.pin is not None else None
    results: list[CheckResult] = []
    for name, host in ctx.loaded.config.hosts.items():
        results.extend(judge_host(probe_host(name, host, pin), pin))
    return results


def judge_host(facts: RemoteFacts, pin: str | None) -> list[CheckResult]:
    subject = f"host/{facts.name}"
    if facts.reach_error is not None:
        err = facts.reach_error
        remedy = REACH_REMEDY.get(err.code, REACH_REMEDY["writer_host_unreachable"])
        return [CheckResult("remote_reachable", "error", subject, f"{err.code}: {err.message}",
                            remedy, blocking=True, data={"code": err.code})]  # fmt: skip
    reached = CheckResult("remote_reachable", "ok", subject,
                          "answers over SSH with its pinned host key")  # fmt: skip
    if facts.api_error is not None or facts.info is None:
        detail = facts.api_error or "no answer"
        api = CheckResult("remote_api", "error", subject,
                          f"its Podman API service does not answer: {detail}", API_REMEDY,
                          blocking=True)  # fmt: skip
        return [reached, api]
    api = CheckResult("remote_api", "ok", subject, "its Podman API service answers")
    return [reached, api, _podman(facts), _tools(facts), _cgroups(facts), _image(facts, pin),
            _disk(facts)]  # fmt: skip


def _tools(facts: RemoteFacts) -> CheckResult:
    subject = f"host/{facts.name}"
    if not facts.missing_tools:
        return CheckResult("remote_tools", "ok", subject,
                           "podman and python3 are on the SSH user's PATH")  # fmt: skip
    missing = ", ".join(facts.missing_tools)
    return CheckResult("remote_tools", "error", subject,
                       f"not on the SSH user's PATH in a non-interactive session: {missing} "
                       "(sessions and streams run the host's podman; acceptance and the "
                       "isolation control run python3)",
                       f"install {missing} on the host for the SSH user (a PATH set only in "
                       "an interactive shell's profile is not seen)", blocking=True,
                       data={"missing": list(facts.missing_tools)})  # fmt: skip


def _podman(facts: RemoteFacts) -> CheckResult:
    subject = f"host/{facts.name}"
    assert facts.info is not None
    data = {"version": facts.version, "rootless": facts.info.host.security.rootless}
    if not facts.info.host.security.rootless:
        return CheckResult("remote_podman", "error", subject,
                           f"Podman {facts.version} runs rootful for the SSH user",
                           "connect as an ordinary account with rootless Podman (subuid and "
                           "subgid ranges, its own XDG_RUNTIME_DIR)", blocking=True,
                           data=data)  # fmt: skip
    return CheckResult("remote_podman", "ok", subject, f"rootless Podman {facts.version}",
                       data=data)  # fmt: skip


def _cgroups(facts: RemoteFacts) -> CheckResult:
    subject = f"host/{facts.name}"
    assert facts.info is not None
    host = facts.info.host
    missing = [c for c in LIMIT_CONTROLLERS if c not in host.cgroup_controllers]
    data = {"layout": host.cgroup_version, "missing": missing}
    if host.cgroup_version == "v2" and not missing:
        return CheckResult("remote_cgroups", "ok", subject,
                           "cgroups v2: memory, CPU and pids limits apply", data=data)  # fmt: skip
    message = (
        f"cgroups {host.cgroup_version or 'unknown'}: Podman ignores "
        f"{', '.join(missing) or 'some'} limits there, so sessions run unlimited"
    )
    if host.cgroup_version != "v2" and version_tuple(facts.version) >= CGROUP_V1_DEPRECATED:
        # As this machine's podman_usable says of itself: the host's next Podman stops.
        message += f"; Podman {facts.version} deprecates cgroup v1 and Podman 6 removes it"
    return CheckResult("remote_cgroups", "warning", subject, message,
                       "boot the host with the unified cgroup v2 hierarchy and delegate the "
                       "memory, cpu and pids controllers to users", data=data)  # fmt: skip


def _image(facts: RemoteFacts, pin: str | None) -> CheckResult:
    subject = f"host/{facts.name}"
    if pin is None:
        return CheckResult("remote_image", "warning", subject, "no writer image is pinned here",
                           "run `writerpool image build`, then `writerpool image transfer "
                           f"--host {facts.name}`")  # fmt: skip
    if facts.image_present:
        return CheckResult("remote_image", "ok", subject,
                           f"holds the pinned writer image {pin[:12]}")  # fmt: skip
    return CheckResult("remote_image", "error", subject,
                       f"lacks the pinned writer image {pin[:12]}",
                       f"run `writerpool image transfer --host {facts.name}`",
                       blocking=True)  # fmt: skip


def _disk(facts: RemoteFacts) -> CheckResult:
    subject = f"host/{facts.name}"
    if facts.free_bytes is None:
        return CheckResult("remote_disk", "warning", subject,
                           facts.disk_error or "free disk space unknown",
                           "check the host's container storage by hand (`df` on it)")  # fmt: skip
    gib = facts.free_bytes / 1024**3
    data = {"freeBytes": facts.free_bytes}
    if facts.free_bytes < LOW_DISK_BYTES:
        return CheckResult("remote_disk", "warning", subject,
                           f"{gib:.1f} GiB free in its container storage",
                           "free space on the host (`podman system prune` there, or a larger "
                           "disk)", data=data)  # fmt: skip
    return CheckResult("remote_disk", "ok", subject, f"{gib:.1f} GiB free in its container storage",
                       data=data)  # fmt: skip
