"""The header helper a client registered over HTTP runs before it connects:
`<python> -m writerpool.service.header SERVICE_DIR CLIENT URL` prints
`{"Authorization": "Bearer …"}` with the token writerpool holds for CLIENT, and only
when the pool service itself listens at URL. Claude Code (`headersHelper`) and Codex
(`http_headers_helper`) run it through a shell and read its standard output: the token
never appears on any command line nor in the client's files.

It refuses (exit 1, a line on stderr, nothing on stdout) when the service is not
running, listens elsewhere, or anyone but this account holds the port: another local
account that took the port while the service was down then gets a request without the
token. The service directory is given explicitly: Codex runs helpers with HOME and PATH
only, so writerpool's XDG locations cannot be found from the environment.

Kept to the standard library and service/port.py: a client runs it at every connection.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from writerpool.service.port import holders

CLIENT_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")  # as service/tokens.py names clients


class Refused(Exception):
    """Why no header is given (a line for the client's log: no path, no token)."""


def _record(directory: Path) -> dict[str, object]:
    try:
        record = json.loads((directory / "service.json").read_bytes()[:65536])
    except (OSError, ValueError) as exc:
        raise Refused("the pool service is not running (writerpool service start)") from exc
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(pid, int) or pid <= 1 or not _alive(pid):
        raise Refused("the pool service is not running (writerpool service start)")
    return dict(record)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # the pid was reused by another account's process
    return True


def header(directory: Path, client: str, url: str) -> dict[str, str]:
    """The header for `client` to send to `url`, after every check above."""
    record = _record(directory)
    if record.get("url") != url:
        raise Refused(
            "the pool service listens at another URL now; run `writerpool register "
            "TARGET --http --apply` again"
        )
    port = record.get("port")
    owners = {holder.uid for holder in holders(port)} if isinstance(port, int) else set()
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
        print("usage: python -m writerpool.service.header SERVICE_DIR CLIENT URL", file=sys.stderr)
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
