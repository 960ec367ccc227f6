"""The header helper a client registered over HTTP runs before it connects:
`<python> -I <this file> SERVICE_DIR CLIENT URL` prints
`{"Authorization": "Bearer …"}` with the token writerpool holds for CLIENT, and only
when the pool service itself listens at URL. Claude Code (`headersHelper`) and Codex
(`http_headers_helper`) run it through a shell and read its standard output: the token
never appears on any command line nor in the client's files.

It refuses (exit 1, a line on stderr, nothing on stdout) when the service is not
running, listens elsewhere, or anyone but this account holds the port: another local
account that took the port while the service was down then gets a request without the
token. The service directory is given explicitly: Codex runs helpers with HOME and PATH
only, so writerpool's XDG locations cannot be found from the environment.

Run by its path, in isolated mode, and kept to the standard library: it works whatever
the client's environment and however writerpool was installed, and starts fast (a
client runs it at every connection). What it reads is written by state/service_record.py
(service.json) and state/tokens.py (held/NAME); service/port.py reads the socket tables
with it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
LISTEN = "0A"
# Local addresses whose listener takes 127.0.0.1:PORT: loopback itself, and the wildcard
# of IPv4 and of IPv6 (dual stack), as the kernel's tables print them.
COVERING = frozenset({
    "0100007F", "00000000",
    "00000000000000000000000000000000",
    "0000000000000000FFFF00000100007F", "0000000000000000FFFF000000000000",
})  # fmt: skip
CLIENT_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")  # as state/tokens.py names clients


class Refused(Exception):
    """Why no header is given (a line for the client's log: no path, no token)."""


def parse_listeners(text: str, port: int) -> list[int]:
    """The uids of the listeners on `port` that take 127.0.0.1, from one table's text
    (/proc/net/tcp names every socket's owner, whoever it is)."""
    found = []
    for line in text.splitlines()[1:]:  # bounded by the table the kernel printed
        fields = line.split()
        if len(fields) < 8 or fields[3] != LISTEN:
            continue
        address, _, port_hex = fields[1].partition(":")
        try:
            if int(port_hex, 16) == port and address.upper() in COVERING:
                found.append(int(fields[7]))
        except ValueError:
            continue
    return found


def listener_uids(port: int, tables: tuple[Path, ...] = TABLES) -> list[int]:
    """The owners of every listener on 127.0.0.1:`port` this network namespace shows."""
    found: list[int] = []
    for table in tables:
        try:
            found += parse_listeners(table.read_text(), port)
        except OSError:
            continue  # no IPv6 on this host, say
    return found


def _record(directory: Path) -> dict[str, object]:
    try:
        record = json.loads((directory / "service.json").read_bytes()[:65536])
    except (OSError, ValueError) as exc:
        raise Refused("the pool service is not running (writerpool service start)") from exc
    if not isinstance(record, dict) or not _runs(record):
        raise Refused("the pool service is not running (writerpool service start)")
    return dict(record)


def _runs(record: dict[str, object]) -> bool:
    """proc.is_recorded_process, in the standard library only (this file runs alone): a
    killed service's pid may be another process's by now; its start time tells them apart."""
    pid, when = record.get("pid"), record.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat", "rb") as stat:
            now = int(stat.read().rpartition(b")")[2].split()[19])
    except (OSError, ValueError, IndexError):  # gone, another account's, or unreadable
        return False
    return not isinstance(when, int) or now == when


def header(directory: Path, client: str, url: str) -> dict[str, str]:
    """The header for `client` to send to `url`, after every check above."""
    record = _record(directory)
    if record.get("url") != url:
        raise Refused(
            "the pool service listens at another URL now; run `writerpool register "
            "TARGET --http --apply` again"
        )
    port = record.get("port")
    owners = set(listener_uids(port)) if isinstance(port, int) else set()
    if owners != {os.getuid()}:
        others = ", ".join(f"uid {uid}" for uid in sorted(owners - {os.getuid()})) or "nobody"
        raise Refused(f"127.0.0.1:{port} is held by {others}, not by the pool service")
    token = _held(directory, client)
    return {"Authorization": f"Bearer {token}"}


def _held(directory: Path, client: str) -> str:
    if not CLIENT_NAME.fullmatch(client):
        raise Refused("not a client name")
    try:
        token = (directory / "held" / client).read_text()[:256].strip()
    except OSError as exc:
        raise Refused(f"writerpool holds no token for {client}; register it again") from exc
    if not token:
        raise Refused(f"writerpool holds no token for {client}; register it again")
    return token


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: header.py SERVICE_DIR CLIENT URL", file=sys.stderr)
        return 2
    try:
        value = header(Path(argv[0]), argv[1], argv[2])
    except Refused as exc:
        print(f"writerpool: no token sent: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(value) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
