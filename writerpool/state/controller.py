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

from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError

FILE = "controller-id"
_ID = re.compile(r"[0-9a-f]{16}")


def controller_id(paths: Paths) -> str:
    """This state's id, made on first use (two first uses at once agree on one)."""
    path = paths.state_dir / FILE
    try:
        found = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        paths.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        made = paths.state_dir / f".{FILE}.{secrets.token_hex(6)}"
        made.write_text(secrets.token_hex(8) + "\n", encoding="ascii")
        try:
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(made, path)  # whole or not at all: a reader never sees it half
        finally:
            made.unlink()
        found = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path) from exc
    if not _ID.fullmatch(found):
        raise _unreadable(path)
    return found


def name_taken(what: str, writer: str, host: str, theirs: str, ours: str) -> WriterpoolError:
    """The refusal to touch `what` (a container or volume) of another state's writer."""
    return WriterpoolError(
        "writer_name_taken",
        f"{what} on host {host} belongs to writer {writer} of another writerpool state "
        f"(controller {theirs}; this state is {ours}); writerpool leaves that writer's "
        "containers and storage alone: give this workspace another alias, or use that state",
    )


def _unreadable(path: os.PathLike[str]) -> WriterpoolError:
    return WriterpoolError(
        "state_id_invalid",
        f"{os.fspath(path)} does not hold this state's id (16 hex digits); the containers "
        "and volumes of this state's writers carry it: restore the file, never remove it",
    )
