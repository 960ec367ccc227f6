"""The id of this writerpool state (its state directory): every container and volume the
state makes carries it (runtime/spec.py LABEL_CONTROLLER), so that a fence, a release or
a removal never takes what another state of the same Podman account made. Writers are
named by their workspace's alias, and one account may hold two states (two
configurations, or two controllers sharing one host's account) with an alias in common.

Made once, at random, and kept: a copied or moved state directory keeps its id, and so
its writers."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from pathlib import Path

from writerpool.atomic import fsync_dir
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError

FILE = "controller-id"
_ID = re.compile(r"[0-9a-f]{16}")


def controller_id(paths: Paths) -> str:
    """This state's id, made on first use (two first uses at once agree on one)."""
    path = paths.state_dir / FILE
    try:
        if not path.is_symlink() and not path.exists():
            _make(path)
        found = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, getattr(exc, "strerror", None) or str(exc)) from exc
    if path.is_symlink() or not _ID.fullmatch(found):
        raise _unreadable(path, "not 16 hex digits in a file of its own")
    return found


def _make(path: Path) -> None:
    """Write a new id whole (synced) beside `path`, then link it there: a reader sees no
    file or the whole one, and of two processes the first link wins."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    made = path.parent / f".{FILE}.{secrets.token_hex(6)}"
    try:
        fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, (secrets.token_hex(8) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):  # another process made it first
            os.link(made, path)
        fsync_dir(path.parent)
    finally:
        made.unlink(missing_ok=True)


def name_taken(what: str, writer: str, host: str, theirs: str, ours: str) -> WriterpoolError:
    """The refusal to touch `what` (a container or volume) of another state's writer."""
    return WriterpoolError(
        "writer_name_taken",
        f"{what} on host {host} belongs to writer {writer} of another writerpool state "
        f"(controller {theirs}; this state is {ours}); writerpool leaves that writer's "
        "containers and storage alone: give this workspace another alias, or use that state",
    )


def _unreadable(path: Path, why: str) -> WriterpoolError:
    return WriterpoolError(
        "state_id_invalid",
        f"{path} cannot serve as this state's id ({why}); the containers and volumes of "
        "this state's writers carry it (podman inspect shows it as the label "
        "io.writerpool.controller): restore the file, never replace it",
    )
