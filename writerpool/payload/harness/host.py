"""The writer's containment of files, processes and privileges: the verdict's checks."""

from __future__ import annotations

import glob
import os
import tempfile

from .probe import Result, env_list


def check_canaries() -> Result:
    canaries = env_list("WRITERPOOL_HARNESS_CANARIES")
    if not canaries:
        return "inconclusive", "no canaries given"
    for path in canaries:
        try:
            with open(path, "rb") as f:
                f.read(1)
        except OSError:
            continue
        return "fail", "a canary file is readable"
    return "pass", "canaries unreadable"


def check_host_home() -> Result:
    home = os.environ.get("WRITERPOOL_HARNESS_HOST_HOME", "")
    if home and os.path.isdir(home):
        try:
            if os.listdir(home):
                return "fail", "the host home is visible"
        except OSError:
            pass
    own = os.path.realpath(os.path.expanduser("~"))
    others = [d for d in glob.glob("/home/*") + glob.glob("/root/*") if os.path.realpath(d) != own]
    if others:
        return "fail", "other users' files are visible"
    return "pass", "no host home visible"


def check_work_writable() -> Result:
    work = os.environ.get("WRITERPOOL_HARNESS_WORK", "/work")
    try:
        with tempfile.NamedTemporaryFile(dir=work, prefix=".harness-") as f:
            f.write(b"x")
    except OSError:
        return "fail", "the work directory is not writable"
    return "pass", "work directory writable"


def _mount_options(target: str) -> list[str] | None:
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[4] == target:
            found = fields[5].split(",")  # the last mount on a target wins
    return found


def check_root_readonly() -> Result:
    options = _mount_options("/")
    if options is None:
        return "inconclusive", "mount table unreadable"
    return ("pass", "root is read-only") if "ro" in options else ("fail", "root is writable")


def _status_field(name: str) -> str | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def check_capabilities() -> Result:
    value = _status_field("CapEff")
    if value is None:
        return "inconclusive", "CapEff unreadable"
    return ("pass", "no capabilities") if int(value, 16) == 0 else ("fail", "capabilities held")


def check_no_new_privs() -> Result:
    value = _status_field("NoNewPrivs")
    if value is None:
        return "inconclusive", "NoNewPrivs unreadable"
    return ("pass", "no_new_privs set") if value == "1" else ("fail", "no_new_privs unset")


def _ancestry() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def check_pid_namespace() -> Result:
    # In its own PID namespace the harness sees only its ancestors (and their children).
    visible = {int(d) for d in os.listdir("/proc") if d.isdigit()}
    mine = _ancestry()
    strangers = visible - mine
    parents = set()
    for pid in strangers:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parents.add(int(f.read().rsplit(")", 1)[1].split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    if len(strangers) <= 2 and parents <= mine:
        return "pass", "own PID namespace"
    return "fail", "host processes are visible"


def check_user_namespace() -> Result:
    try:
        with open("/proc/self/uid_map") as f:
            rows = [line.split() for line in f.read().splitlines()]
    except OSError:
        return "inconclusive", "uid_map unreadable"
    if rows == [["0", "0", "4294967295"]]:
        return "fail", "initial user namespace"
    return "pass", "own user namespace"


def check_engine_socket() -> Result:
    patterns = [
        "/run/podman/podman.sock", "/var/run/docker.sock", "/run/docker.sock",
        "/run/user/*/podman/podman.sock", "/run/user/*/docker.sock",
        "/var/run/podman/podman.sock",
    ]  # fmt: skip
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        patterns.append(os.path.join(runtime_dir, "podman", "podman.sock"))
    if any(glob.glob(p) for p in patterns):
        return "fail", "a container engine socket is reachable"
    return "pass", "no engine socket"


CREDENTIAL_FILES = [
    ".ssh/id_*", ".git-credentials", ".config/git/credentials", ".config/gh/hosts.yml",
    ".pi/agent/auth.json", ".aws/credentials", ".netrc", ".docker/config.json",
]  # fmt: skip
KEY_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_ACCESS_KEY")


def check_credentials() -> Result:
    homes = [os.path.expanduser("~"), os.environ.get("WRITERPOOL_HARNESS_HOST_HOME", "")]
    for home in filter(None, homes):
        for pattern in CREDENTIAL_FILES:
            if glob.glob(os.path.join(home, pattern)):
                return "fail", "host credential files are visible"
    allowed = set(env_list("WRITERPOOL_HARNESS_ALLOWED_KEYS"))
    leaked = [k for k in os.environ if k.endswith(KEY_SUFFIXES) and k not in allowed]
    if leaked:
        return "fail", "credential variables are set"
    return "pass", "no host credentials"


HOST_CHECKS = {
    "host_canary": check_canaries,
    "host_home": check_host_home,
    "work_writable": check_work_writable,
    "root_readonly": check_root_readonly,
    "capabilities": check_capabilities,
    "no_new_privs": check_no_new_privs,
    "pid_namespace": check_pid_namespace,
    "user_namespace": check_user_namespace,
    "engine_socket": check_engine_socket,
    "credentials": check_credentials,
}
