"""Each agent a workspace's profiles use, as acceptance rendered its directory (its
backend's render, pointed at the session's proxy with the canary as the key behind it):
no file of its part of the agent directory and no argument or variable its backend gives
it holds the canary (`agent_<name>_key_absent`), and its provider endpoint is the
in-writer forwarder whose one way out is the proxy, and the request the agent would send
with the key it presents reaches acceptance's provider through the proxy
(`agent_<name>_via_proxy`: acceptance also checks that the canary arrived there).

Inputs: WRITERPOOL_HARNESS_AGENTS (JSON: each agent's name and the command its backend
gives it, environment included), WRITERPOOL_HARNESS_AGENT_DIR (where the agent directory
is mounted). The isolation control gives WRITERPOOL_HARNESS_AGENT_FILES instead of a
directory (JSON: relative path to text, each agent's directory rendered with the key
given to the agent itself), written here under the private work directory first.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
from collections.abc import Callable

from .canary import CANARY_RE
from .probe import Result

AGENT_DIR = "/pi/agent"
CHECKS = ("key_absent", "via_proxy")
# Each backend's own part of the agent directory; pi's is the rest.
SUBDIRS = {"claude-code": "claude", "codex": "codex"}
KEY_FILE = "key"
MAX_FILE_BYTES = 1024 * 1024
URL_RE = re.compile(r"https?://([^/\"'\s]+)")
TOKEN_REFUSED = b"a valid session token is required"
# What acceptance's provider answers (pool/acceptance/peers.py PROVIDER_ANSWER).
PROVIDER_ANSWER = b"writerpool acceptance provider"


def agents() -> dict[str, list[str]]:
    try:
        given = json.loads(os.environ.get("WRITERPOOL_HARNESS_AGENTS", "{}"))
    except ValueError:
        return {}
    if not isinstance(given, dict):
        return {}
    return {str(n): [str(a) for a in v] for n, v in given.items() if isinstance(v, list)}


def agent_dir() -> str:
    files = os.environ.get("WRITERPOOL_HARNESS_AGENT_FILES")
    if files is None:
        return os.environ.get("WRITERPOOL_HARNESS_AGENT_DIR", AGENT_DIR)
    root = os.path.join(os.environ.get("WRITERPOOL_HARNESS_WORK", "/work"), "agent")
    for rel, text in json.loads(files).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(text)
    return root


def own_files(root: str, agent: str) -> dict[str, bytes]:
    """The agent's part of the agent directory: relative path to content."""
    sub = SUBDIRS.get(agent)
    top = os.path.join(root, sub) if sub else root
    others = set(SUBDIRS.values())
    found: dict[str, bytes] = {}
    for base, dirs, names in os.walk(top):
        if sub is None and base == top:
            dirs[:] = [d for d in dirs if d not in others]
        for name in names:
            path = os.path.join(base, name)
            try:
                with open(path, "rb") as f:
                    found[os.path.relpath(path, root)] = f.read(MAX_FILE_BYTES)
            except OSError:
                found[os.path.relpath(path, root)] = b""
    return found


def presented_key(root: str, agent: str, forwarder: str) -> str | None:
    """The key the agent sends its provider, read where its backend puts it."""
    sub = SUBDIRS.get(agent)
    try:
        if sub is not None:
            with open(os.path.join(root, sub, KEY_FILE)) as f:
                return f.read().strip()
        with open(os.path.join(root, "models.json")) as f:
            providers = json.load(f).get("providers", {})
    except (OSError, ValueError):
        return None
    for entry in providers.values():
        if isinstance(entry, dict) and str(entry.get("baseUrl", "")).startswith(forwarder):
            return str(entry.get("apiKey", ""))
    return None


def key_absent(root: str, agent: str, argv: list[str]) -> Result:
    files = own_files(root, agent)
    if not files:
        return "inconclusive", "its agent directory holds no file"
    held = sorted(r for r, d in files.items() if CANARY_RE.search(d.decode("latin-1")))
    if held:
        return "fail", "the canary credential is in " + ", ".join(held[:4])
    if any(CANARY_RE.search(a) for a in argv):
        return "fail", "the canary credential is in its command or environment"
    return "pass", f"no key in its {len(files)} file(s), its command or environment"


def _proxy_answer(path: str, token: str, agent: str) -> bytes:
    """The proxy's answer to the request the agent would send (its key, the Responses
    route of acceptance's provider), naming the agent as its `input`."""
    body = json.dumps({"model": "writerpool-acceptance", "input": agent}).encode()
    request = (f"POST /p/responses HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {token}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
               "Connection: close\r\n\r\n").encode() + body  # fmt: skip
    answer = b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(request)
        while len(answer) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer


def via_proxy(root: str, agent: str) -> Result:
    if os.environ.get("WRITERPOOL_HARNESS_CANARY") == "skip":
        return "pass", "an open network kind: the key is given to the agent (NOT limited)"
    path = os.environ.get("WRITERPOOL_EGRESS_SOCKET", "")
    port = os.environ.get("WRITERPOOL_EGRESS_PORT", "")
    if not path:
        return "pass", "no proxy socket (no network at all)"
    forwarder = f"127.0.0.1:{port}"
    text = b"".join(own_files(root, agent).values()).decode("latin-1")
    places = set(URL_RE.findall(text))
    if places != {forwarder}:
        return "fail", f"its provider endpoint is not only the forwarder: {sorted(places)[:4]}"
    key = presented_key(root, agent, f"http://{forwarder}")
    if not key or CANARY_RE.search(key):
        return "fail", "it presents no session token"
    try:
        answer = _proxy_answer(path, key, agent)
    except OSError:
        return "fail", "the proxy socket does not answer"
    if not answer.startswith(b"HTTP/") or TOKEN_REFUSED in answer:
        return "fail", "the proxy refused the key it presents"
    if PROVIDER_ANSWER not in answer:
        return "fail", "the provider did not answer through the proxy"
    return (
        "pass",
        "its endpoint is the forwarder; through the proxy its request reached the provider",
    )


def agent_checks() -> dict[str, Callable[[], Result]]:
    given = agents()
    if not given:
        return {}
    try:
        root = agent_dir()
    except (OSError, ValueError, AttributeError):  # the control's files unusable here
        unusable: Result = ("inconclusive", "the agent directory could not be made")
        return {f"agent_{n}_{c}": (lambda: unusable) for n in given for c in CHECKS}
    checks: dict[str, Callable[[], Result]] = {}
    for name, argv in sorted(given.items()):
        checks[f"agent_{name}_key_absent"] = functools.partial(key_absent, root, name, argv)
        checks[f"agent_{name}_via_proxy"] = functools.partial(via_proxy, root, name)
    return checks
