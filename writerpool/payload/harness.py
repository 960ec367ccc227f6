"""The acceptance harness: probes its own environment and prints a JSON report.

One program serves both sides: the isolation control runs it uncontained on the host
(where it must see escapes), acceptance runs it inside a writer's container (where it
must not). It uses only the standard library and imports nothing from writerpool, so it
runs on any Python 3 inside the image. Inputs come from environment variables:
WRITERPOOL_HARNESS_CANARIES (os.pathsep-separated host files that must be unreadable),
WRITERPOOL_HARNESS_HOST_HOME (the operator's home), WRITERPOOL_HARNESS_WORK (the clone),
WRITERPOOL_HARNESS_ALLOWED_KEYS (credential variables deliberately given),
WRITERPOOL_HARNESS_CANARY ("scan": a canary credential was sent through the real path
and must be found nowhere; "skip": an open network kind, where the key is copied in),
WRITERPOOL_HARNESS_HOST_PORT (a port listening on the host's loopback), and the
proxy socket WRITERPOOL_EGRESS_SOCKET of a `provider` network. A writer with an
allowlist also has WRITERPOOL_CONNECT_SOCKET (its allowlist proxy) and
WRITERPOOL_HARNESS_ALLOW_PORT: the `*.acceptance.test` names below are resolved by that
proxy (listed → the host port, private → a private address, loopback → another
loopback address; unlisted is not listed), and only the listed one may pass.

The network checks decide the classification and are reported apart from the verdict:
an open network kind is accepted as `not_limited`, never as `limited`. Active probes
(name resolution, a direct connection) run only where no route exists, so no packet
can leave: on a host with a route the passive checks already say `not_limited`.
"""

from __future__ import annotations

import glob
import json
import os
import re
import socket
import stat
import sys
import tempfile
from collections.abc import Callable

SCHEMA_VERSION = 1
Result = tuple[str, str]  # (status, detail) with status pass|fail|inconclusive


def _env_list(name: str) -> list[str]:
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]


def check_canaries() -> Result:
    canaries = _env_list("WRITERPOOL_HARNESS_CANARIES")
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
    allowed = set(_env_list("WRITERPOOL_HARNESS_ALLOWED_KEYS"))
    leaked = [k for k in os.environ if k.endswith(KEY_SUFFIXES) and k not in allowed]
    if leaked:
        return "fail", "credential variables are set"
    return "pass", "no host credentials"


# Split so that this file does not match its own pattern.
CANARY_RE = re.compile(("wpcanary-") + r"[0-9a-f]{32}")
# Where writerpool puts anything for a session; all of it is scanned.
SCAN_ROOTS = ("/pi", "/tmp", os.path.expanduser("~"))
SCAN_MAX_FILES = 20000
SCAN_MAX_BYTES = 64 * 1024 * 1024
SCAN_FILE_BYTES = 1024 * 1024


def _canary_in(data: bytes) -> bool:
    return CANARY_RE.search(data.decode("latin-1")) is not None


def _scan_processes() -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as f:
                    if _canary_in(f.read(SCAN_FILE_BYTES)):
                        return True
            except OSError:
                continue
    return False


def _scan_files(roots: tuple[str, ...], budget: int) -> bool | None:
    """True: a canary found; None: the budget ran out first. `.git` directories are
    skipped: their objects are compressed, and nothing of writerpool writes there."""
    files = 0
    stack = [r for r in dict.fromkeys(roots) if os.path.isdir(r)]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and entry.name != ".git":
                stack.append(entry.path)
            elif stat.S_ISREG(mode):
                files += 1
                if files > SCAN_MAX_FILES or budget <= 0:
                    return None
                try:
                    with open(entry.path, "rb") as f:
                        data = f.read(SCAN_FILE_BYTES)
                except OSError:
                    continue
                budget -= len(data)
                if _canary_in(data):
                    return True
    return False


def check_provider_credential() -> Result:
    mode = os.environ.get("WRITERPOOL_HARNESS_CANARY", "")
    if mode == "skip":
        return "pass", "an open network kind: the provider key is copied in (NOT limited)"
    if mode != "scan":
        return "inconclusive", "no canary credential was sent"
    if _scan_processes():
        return "fail", "the canary credential is in a process's environment or arguments"
    found = _scan_files(SCAN_ROOTS, SCAN_MAX_BYTES)
    if found is None:
        return "inconclusive", "too many files to scan"
    # The clone comes from the operator's checkout: scanned as far as the budget goes.
    if found or _scan_files((os.environ.get("WRITERPOOL_HARNESS_WORK", "/work"),), SCAN_MAX_BYTES):
        return "fail", "the canary credential is in a readable file"
    return "pass", "the canary credential is nowhere inside"


def _interfaces() -> list[str]:
    try:
        return [i for i in os.listdir("/sys/class/net") if i != "lo"]
    except OSError:
        return ["unknown"]


def _routes() -> list[str]:
    """Interfaces with a route (IPv4 and IPv6), loopback aside."""
    found = []
    for path, column in (("/proc/net/route", 0), ("/proc/net/ipv6_route", 9)):
        try:
            with open(path) as f:
                rows = [line.split() for line in f.read().splitlines()]
        except OSError:
            return ["unknown"]
        for row in rows:
            if len(row) > column and row[column] not in ("lo", "Iface"):
                found.append(row[column])
    return found


def net_interfaces() -> Result:
    others = _interfaces()
    return ("fail", "interfaces besides loopback") if others else ("pass", "loopback only")


def net_routes() -> Result:
    return ("fail", "a route leads out") if _routes() else ("pass", "no route")


def net_resolve() -> Result:
    if _routes():
        return "fail", "a route exists (not probed)"
    try:
        socket.getaddrinfo("example.com", 443)
    except OSError:
        return "pass", "name resolution fails"
    return "fail", "a name resolved"


def _connects(family: int, address: tuple[str, int]) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(3)
        try:
            s.connect(address)
        except OSError:
            return False
    return True


def net_direct() -> Result:
    if _routes():
        return "fail", "a route exists (not probed)"
    # TEST-NET-1: never a real host; with no route, connect fails before any packet.
    if _connects(socket.AF_INET, ("192.0.2.1", 443)):
        return "fail", "a direct connection out succeeded"
    return "pass", "direct connections fail"


def net_host_loopback() -> Result:
    port = os.environ.get("WRITERPOOL_HARNESS_HOST_PORT", "")
    if not port.isdigit():
        return "inconclusive", "no host port given"
    if _connects(socket.AF_INET, ("127.0.0.1", int(port))):
        return "fail", "the host's loopback answers"
    return "pass", "the host's loopback is out of reach"


def net_proxy() -> Result:
    """The proxy socket answers, and refuses what is not pi's (no token, no route)."""
    path = os.environ.get("WRITERPOOL_EGRESS_SOCKET", "")
    if not path:
        return "pass", "no proxy socket (no network at all)"
    request = b"GET /writerpool-harness-probe HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        try:
            s.connect(path)
            s.sendall(request)
            head = s.recv(64)
        except OSError:
            return "fail", "the proxy socket does not answer"
    status = head.split(b" ", 2)[1:2]
    if status and status[0] in (b"401", b"403"):
        return "pass", "the proxy refuses a request without the session's token"
    return "fail", "the proxy did not refuse a foreign request"


NETWORK_CHECKS = {
    "net_interfaces": net_interfaces,
    "net_routes": net_routes,
    "net_resolve": net_resolve,
    "net_direct": net_direct,
    "net_host_loopback": net_host_loopback,
    "net_proxy": net_proxy,
}
ALLOW_NAMES = ("listed", "unlisted", "private", "loopback")


def _tunnel_status(name: str) -> str:
    """The allowlist proxy's answer to CONNECT <name>.acceptance.test:<port>."""
    path = os.environ.get("WRITERPOOL_CONNECT_SOCKET", "")
    port = os.environ.get("WRITERPOOL_HARNESS_ALLOW_PORT", "")
    target = f"{name}.acceptance.test:{port}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(15)
        try:
            s.connect(path)
            s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = s.recv(512)
        except OSError:
            return "unreachable"
    parts = head.split(b" ", 2)
    return parts[1].decode("ascii", "replace") if len(parts) > 1 else "empty"


def allow_listed() -> Result:
    status = _tunnel_status("listed")
    if status == "200":
        return "pass", "the listed test host is reached through the allowlist proxy"
    return "fail", f"the listed test host is not reached (proxy answered {status})"


def _refused(name: str, what: str) -> Result:
    status = _tunnel_status(name)
    if status == "403":
        return "pass", f"{what} is refused by the allowlist proxy"
    return "fail", f"{what} was not refused (proxy answered {status})"


ALLOW_CHECKS = {
    "allow_listed": allow_listed,
    "allow_unlisted": lambda: _refused("unlisted", "an unlisted host"),
    "allow_private": lambda: _refused("private", "a listed name resolving to a private address"),
    "allow_loopback": lambda: _refused("loopback", "a listed name resolving to loopback"),
}


def _run(probes: dict[str, Callable[[], Result]]) -> dict[str, dict[str, str]]:
    out = {}
    for name, probe in probes.items():
        try:
            status, detail = probe()
        except Exception as exc:  # a probe that breaks proves nothing either way
            status, detail = "inconclusive", type(exc).__name__
        out[name] = {"status": status, "detail": detail}
    return out


CHECKS = {
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
    "provider_credential": check_provider_credential,
}


def main() -> int:
    checks = _run(CHECKS)
    allowlist = bool(os.environ.get("WRITERPOOL_HARNESS_ALLOW_PORT"))
    network = _run({**NETWORK_CHECKS, **(ALLOW_CHECKS if allowlist else {})})
    verdict = "pass" if all(c["status"] == "pass" for c in checks.values()) else "fail"
    limited = all(c["status"] == "pass" for c in network.values())
    kind = "limited-allowlist" if allowlist else "limited"
    report = {
        "schemaVersion": SCHEMA_VERSION,
        "verdict": verdict,
        "network": kind if limited else "not_limited",
        "checks": checks,
        "networkChecks": network,
    }
    json.dump(report, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
