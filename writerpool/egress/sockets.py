"""The proxy's Unix sockets: made private before anyone can connect, swept when stale."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

from writerpool.config.allow_entry import Address
from writerpool.egress import clienthello as ch
from writerpool.egress import connect_model as cm
from writerpool.errors import WriterpoolError

# sun_path holds 108 bytes on Linux, the terminating NUL included.
MAX_SOCKET_PATH = 107
CONNECT_TIMEOUT = 10.0
ANSWER_TIMEOUT = 2.0  # an agent that does not read its refusal (or its 200) is cut


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """An address for bind() or connect() of `path` that fits sun_path: through the
    parent directory's descriptor when the path itself is too long (a deep state
    directory; the name inside the container is short)."""
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def listening_socket(path: Path, backlog: int = 128) -> tuple[socket.socket, int]:
    """A Unix socket listening at `path`, mode 0600, its directory 0700 if made here,
    and the inode of its file (to remove exactly this file later).

    It is bound under a temporary name in the same directory, made 0600, and renamed
    onto `path`: no moment exists when it is reachable with looser permissions, and a
    stale socket left at `path` (a killed server's) is replaced in one step. Anything
    at `path` other than a socket is refused.
    """
    if len(os.fsencode(path.name)) > 64:
        raise WriterpoolError("egress_failed", "the proxy socket's name is too long")
    parent = path.parent
    if not parent.exists():
        parent.mkdir(mode=0o700, parents=True)
        os.chmod(parent, 0o700)
    _refuse_non_socket(path)
    temporary = parent / f".{path.name}.{secrets.token_hex(4)}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket_address(temporary) as address:
            sock.bind(address)
        try:
            os.chmod(temporary, 0o600)
            inode = os.lstat(temporary).st_ino
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)
            raise
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        name = errno.errorcode.get(exc.errno or 0, "error")
        raise WriterpoolError("egress_failed", f"the proxy socket cannot listen ({name})") from exc
    return sock, inode


def _refuse_non_socket(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise WriterpoolError(
            "egress_failed", "something other than a socket is at the proxy's path"
        )


def unlink_socket(path: Path, inode: int | None = None) -> None:
    """Remove the socket at path, if it is one (and the one with `inode`, if given)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISSOCK(info.st_mode) and (inode is None or info.st_ino == inode):
        path.unlink(missing_ok=True)


def remove_stale_socket(path: Path) -> bool:
    """Unlink a socket nobody listens on (its server was killed); True when removed.

    A symlink is never followed and anything but a socket is left alone; a socket
    that accepts a connection, or answers other than "refused", is kept.
    """
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(before.st_mode):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        with socket_address(path) as address:
            probe.connect(address)
    except ConnectionRefusedError:
        pass  # nobody listens: stale
    except OSError:
        return False  # unknown: keep it
    else:
        return False  # alive
    finally:
        probe.close()
    with contextlib.suppress(FileNotFoundError):
        now = os.lstat(path)
        # The same socket file still, not one a new server put there meanwhile.
        if stat.S_ISSOCK(now.st_mode) and now.st_ino == before.st_ino:
            path.unlink()
            return True
    return False


async def dial(address: Address, port: int) -> socket.socket | None:
    """A non-blocking TCP connection to address:port, or None."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await asyncio.get_running_loop().sock_connect(sock, (str(address), port))
    except (OSError, TimeoutError):
        sock.close()
        return None
    return sock


async def answer(agent: socket.socket, data: bytes) -> None:
    """Send a refusal; an agent that does not read it within the deadline is cut."""
    with contextlib.suppress(ConnectionError, OSError, TimeoutError):
        await asyncio.wait_for(send_all(agent, data), ANSWER_TIMEOUT)


# The loop reads and writes an agent's socket with MSG_DONTWAIT, never by its O_NONBLOCK
# flag alone: a socket handed over by the writer (`egress.handoff`) shares that flag
# with whatever copy the writer kept, and a writer that clears it must not make the
# loop block in recv() or send().


async def read_hello(agent: socket.socket, data: bytearray) -> ch.ClientHello:
    """Read into `data` until it starts with a whole ClientHello (at most ch.MAX_READ)."""
    while (hello := ch.read_hello(bytes(data))) is None:  # bounded: MAX_READ bytes
        if len(data) >= ch.MAX_READ:
            raise ch.HelloRefused(ch.HELLO_TOO_LARGE, "no whole ClientHello within its bytes")
        chunk = await receive(agent, ch.MAX_READ - len(data))
        if not chunk:
            raise ch.HelloRefused(cm.HELLO_INCOMPLETE, "the agent ended before its ClientHello")
        data += chunk
    return hello


async def receive(sock: socket.socket, size: int) -> bytes:
    """Up to `size` bytes once some arrive (b"" at the end of input)."""
    while True:  # bounded: each turn waits for the socket to be readable
        try:
            return sock.recv(size, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            await ready(sock)


async def send_all(sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:  # bounded: each turn sends some bytes or waits until it can
        try:
            view = view[sock.send(view, socket.MSG_DONTWAIT) :]
        except (BlockingIOError, InterruptedError):
            await ready(sock, write=True)


async def ready(sock: socket.socket, write: bool = False) -> None:
    """Return once `sock` is readable (or writable)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()
    if write:
        loop.add_writer(fd, _wake, waiter)
    else:
        loop.add_reader(fd, _wake, waiter)
    try:
        await waiter
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
