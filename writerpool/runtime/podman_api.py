"""The calls writerpool makes to Podman's REST API (list containers by label or those
only its storage holds, remove one), over its Unix socket with the standard library.

Every socket opened here is closed on every path, including a failed connect: the API
service exits after an idle time, so a connect can lose that race and must not leave a
socket behind."""

from __future__ import annotations

import http.client
import json
import re
import socket
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import quote, urlencode

# The libpod API under this version prefix is served by Podman 4.x and 5.x alike.
API_PREFIX = "/v4.0.0/libpod"
# Answers larger than this are not a container list writerpool asked for.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
EXTERNAL_TRIES = 5
CREATED_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$")


class ApiError(Exception):
    """The service answered with an unexpected status, or not at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = str(path)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def request(socket_path: Path, method: str, path: str, timeout: float) -> tuple[int, bytes]:
    """One request on a fresh connection, closed before returning."""
    status, body, _ = _exchange(socket_path, method, path, timeout)
    return status, body


def _exchange(socket_path: Path, method: str, path: str, timeout: float) -> tuple[int, bytes, str]:
    """`request`, with the answer's Date header: the time on the service's host."""
    conn = _UnixConnection(socket_path, timeout)
    try:
        conn.request(method, API_PREFIX + path)
        answer = conn.getresponse()
        body = answer.read(MAX_ANSWER_BYTES + 1)
        if len(body) > MAX_ANSWER_BYTES:
            raise ApiError(f"{method} {path}: the answer is larger than expected")
        return answer.status, body, answer.getheader("Date") or ""
    except (OSError, http.client.HTTPException) as exc:
        raise ApiError(f"{method} {path}: {exc}") from exc
    finally:
        conn.close()


def pings(socket_path: Path, timeout: float) -> bool:
    """Whether a Podman API service answers on the socket (its `_ping` says OK)."""
    try:
        status, body = request(socket_path, "GET", "/_ping", timeout)
    except ApiError:
        return False
    return status == 200 and body.strip() == b"OK"


def list_by_label(
    socket_path: Path, label: str, value: str, timeout: float
) -> list[dict[str, object]]:
    filters = json.dumps({"label": [f"{label}={value}"]})
    return _list(socket_path, {"all": "true", "filters": filters}, timeout)


def list_storage_only(
    socket_path: Path, timeout: float
) -> list[tuple[dict[str, object], float | None]]:
    """The containers Podman's storage holds and Podman does not know (state "storage"),
    each with its age in seconds on the host's own clock (None if unreadable): a Podman
    client killed while it created one leaves it behind, holding its name."""
    query = "/containers/json?" + urlencode({"all": "true", "external": "true"})
    for attempt in range(1, EXTERNAL_TRIES + 1):
        status, body, date = _exchange(socket_path, "GET", query, timeout)
        # Podman walks every stored container of the account: one removed meanwhile fails
        # the whole list (500, "container not known"), 3 in 1,357 lists while two loops
        # ran containers. The next list does not meet it.
        if status != 500 or attempt == EXTERNAL_TRIES:
            break
    now = _http_date(date)
    return [(entry, _age(entry.get("Created"), now))
            for entry in _entries(status, body) if entry.get("State") == "storage"]  # fmt: skip


def _list(socket_path: Path, query: dict[str, str], timeout: float) -> list[dict[str, object]]:
    status, body = request(socket_path, "GET", "/containers/json?" + urlencode(query), timeout)
    return _entries(status, body)


def _entries(status: int, body: bytes) -> list[dict[str, object]]:
    if status != 200:
        raise ApiError(f"listing containers answered {status}", status)
    try:
        found = json.loads(body)
    except ValueError as exc:
        raise ApiError("listing containers answered something that is not JSON") from exc
    if not isinstance(found, list):
        raise ApiError("listing containers answered something that is not a list")
    return [entry for entry in found if isinstance(entry, dict)]


def _http_date(value: str) -> datetime | None:
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None


def _age(created: object, now: datetime | None) -> float | None:
    # RFC 3339 with up to nanoseconds, as Go writes it: the seconds are enough.
    found = CREATED_RE.match(created) if isinstance(created, str) else None
    if found is None or now is None:
        return None
    zone = "+00:00" if found[2] == "Z" else found[2]
    return (now - datetime.fromisoformat(found[1] + zone)).total_seconds()


def remove(socket_path: Path, container_id: str, timeout: float) -> bool:
    """Stop at once (no grace period) and remove; False when there is no such container."""
    ident = quote(container_id, safe="")
    status, _ = request(socket_path, "POST", f"/containers/{ident}/stop?timeout=0", timeout)
    # Not found to stop may still be one only the storage holds: the removal takes it.
    if status not in (204, 304, 404):
        raise ApiError(f"stopping a container answered {status}", status)
    status, _ = request(socket_path, "DELETE", f"/containers/{ident}?force=true", timeout)
    if status == 404:
        return False
    if status not in (200, 204):
        raise ApiError(f"removing a container answered {status}", status)
    return True
