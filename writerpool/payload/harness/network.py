"""The network checks: interfaces, routes, name resolution, a direct connection, the
host's loopback and the provider proxy. They decide the classification."""

from __future__ import annotations

import os
import socket

from .probe import Result


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
