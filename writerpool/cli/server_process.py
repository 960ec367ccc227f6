"""What a long-running server process (`serve`, `service run`) sets up first."""

from __future__ import annotations

import logging
import sys

from writerpool import fdlimit

log = logging.getLogger(__name__)


def prepare_server_process(label: str, verbose: bool) -> None:
    """Logs on stderr under `label`, and the descriptor limit raised as far as the
    account allows (warned when that is less than a full pool needs)."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format=f"{label}: %(levelname)s %(name)s: %(message)s",
    )
    limit = fdlimit.raise_to_hard()
    if limit < fdlimit.needed():
        log.warning("%d file descriptors only (a full pool needs %d); see writerpool doctor",
                    limit, fdlimit.needed())  # fmt: skip
