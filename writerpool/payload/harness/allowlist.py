"""The allowlist proxy's probes (a writer whose workspace has an allowlist).

Each asks the proxy at WRITERPOOL_CONNECT_SOCKET for something under `acceptance.test`
(a name no resolver knows: acceptance's proxy has its own answers for the listed ones)
on the port WRITERPOOL_HARNESS_ALLOW_PORT, where a test peer on the proxy's loopback
answers whatever reaches it. The listed name must be reached; every other probe passes
only when the proxy refuses it with its own reason: named in the refusal's status line,
or, for a ClientHello refused in a tunnel, by the TLS alert's description (`tls`).

Uncontained (the isolation control) the same probes go through an open relay and each
reaches the peer: the ClientHellos and the smuggled request arrive, and the peer's answer
says so in the probe's detail.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

from .probe import Result
from .tls import alert_reason, client_hello

DOMAIN = "acceptance.test"
TIMEOUT = 15.0
MAX_ANSWER = 4096
HEAD_END = b"\r\n\r\n"
REASON = re.compile(r"\(([a-z0-9_]{1,40})\)$")  # a refusal's status line ends with it
PRINTABLE = re.compile(r"[^\x20-\x7e]")


@dataclass(frozen=True)
class Answer:
    status: str  # the first status code read, or "unreachable" / "empty"
    reason: str | None  # the reason its status line names
    after: bytes  # what came after that head (a tunnel's answer, a body)


def _target(name: str) -> str:
    return f"{name}:{os.environ.get('WRITERPOOL_HARNESS_ALLOW_PORT', '')}"


def _connect(target: str) -> bytes:
    return f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()


def _read(s: socket.socket, data: bytes, until_head: bool) -> bytes:
    """Read on from `data` until a head's end (or the whole answer), EOF or the cap."""
    while len(data) < MAX_ANSWER and not (until_head and HEAD_END in data):
        chunk = s.recv(MAX_ANSWER - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _exchange(head: bytes, tunnel: bytes | None = None) -> Answer:
    """Send `head` (a whole request, its sending side then closed unless a tunnel follows);
    once a tunnel is established, send `tunnel` into it and read what comes back."""
    path = os.environ.get("WRITERPOOL_CONNECT_SOCKET", "")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(TIMEOUT)
        try:
            s.connect(path)
            s.sendall(head)
            if tunnel is None:
                s.shutdown(socket.SHUT_WR)
            data = _read(s, b"", until_head=True)
            first, _, after = data.partition(HEAD_END)
            words = first.split(b"\r\n", 1)[0].decode("ascii", "replace").split(" ", 2)
            status = words[1] if len(words) > 1 else "empty"
            if tunnel is not None and status == "200":
                s.sendall(tunnel)
                s.shutdown(socket.SHUT_WR)
            after = _read(s, after, until_head=False)
        except OSError:
            return Answer("unreachable", None, b"")
    found = REASON.search(words[-1]) if len(words) > 2 else None
    return Answer(status, found.group(1) if found else None, after)


def _said(answer: Answer) -> str:
    said = f"the proxy answered {answer.status}"
    if answer.reason:
        said += f" ({answer.reason})"
    alert = alert_reason(answer.after)
    if alert is not None:
        said += f", then a TLS alert ({alert})"
    elif answer.after:
        line = answer.after.split(b"\n", 1)[0].rstrip(b"\r").decode("ascii", "replace")
        said += ", then the peer's answer: " + PRINTABLE.sub("?", line)[:80]
    return said


def _refused(answer: Answer, status: str, reason: str, what: str) -> Result:
    if answer.status == status and answer.reason == reason:
        return "pass", f"{what} is refused ({status} {reason})"
    return "fail", f"{what} was not refused as {reason}: {_said(answer)}"


def allow_listed() -> Result:
    answer = _exchange(_connect(_target(f"listed.{DOMAIN}")))
    if answer.status == "200":
        return "pass", "the listed test host is reached through the allowlist proxy"
    return "fail", f"the listed test host is not reached: {_said(answer)}"


def _refused_connect(name: str, reason: str, what: str) -> Result:
    return _refused(_exchange(_connect(_target(name))), "403", reason, what)


def allow_lookup() -> Result:
    # A name no one has asked for before: if the proxy looked it up before deciding, the
    # query would go to its resolver (tests watch that resolver; nothing is asked).
    name = f"lookup-{os.urandom(6).hex()}.{DOMAIN}"
    return _refused_connect(name, "not_listed", "a name listed and mapped nowhere")


def _hello_refused(server_name: str | None, reason: str, what: str) -> Result:
    """A ClientHello for `server_name` in a tunnel to the listed name: refused with the
    alert of `reason`, nothing sent on."""
    answer = _exchange(_connect(_target(f"listed.{DOMAIN}")), client_hello(server_name))
    if answer.status == "200" and alert_reason(answer.after) == reason:
        return "pass", f"{what} is refused with a TLS alert ({reason})"
    return "fail", f"{what} was not refused as {reason}: {_said(answer)}"


def allow_smuggle() -> Result:
    """A second request hidden behind a bare LF, on the listed `http://` entry."""
    target = _target(f"listed.{DOMAIN}")
    head = (f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\nX-A: a\n\n"
            f"GET /smuggled HTTP/1.1\nHost: unlisted.{DOMAIN}\r\n\r\n").encode()  # fmt: skip
    what = "a request smuggled behind a bare LF on an http:// entry"
    return _refused(_exchange(head), "400", "bad_request", what)


ALLOW_CHECKS = {
    "allow_listed": allow_listed,
    "allow_unlisted": lambda: _refused_connect(
        f"unlisted.{DOMAIN}", "not_listed", "an unlisted host"
    ),
    "allow_private": lambda: _refused_connect(
        f"private.{DOMAIN}", "address_private", "a listed name resolving to a private address"
    ),
    "allow_loopback": lambda: _refused_connect(
        f"loopback.{DOMAIN}", "address_loopback", "a listed name resolving to loopback"
    ),
    "allow_literal": lambda: _refused_connect(
        "127.0.0.2", "not_listed", "an address no entry lists"
    ),
    "allow_lookup": allow_lookup,
    "allow_sni_mismatch": lambda: _hello_refused(
        f"other.{DOMAIN}", "sni_mismatch", "a ClientHello for another name than the CONNECT's"
    ),
    "allow_sni_missing": lambda: _hello_refused(
        None, "sni_missing", "a ClientHello without a server name"
    ),
    "allow_smuggle": allow_smuggle,
}
