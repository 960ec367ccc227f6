"""Removing the images a test made, never while a container of theirs is still there.

`podman rmi --force` also removes every container of the image, and on Podman 4.3 one
whose cleanup (conmon's `podman container cleanup`, after a `run --rm`) is still under
way can leave its overlay mounted in the rootless namespace with its layer marked for
deletion: from then on every podman command of the account fails with "device or
resource busy" until that namespace ends. So the images go (`--force` only untags an
image with several names) once no container of theirs is left.
"""

from __future__ import annotations

import time

from writerpool.proc import run
from writerpool.runtime.podman import podman_env

ATTEMPTS = 120  # of 0.25 s: a cleanup under load takes seconds


def _podman(*args: str) -> bytes:
    done = run(["podman", *args], env=podman_env(), timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"podman {args[0]} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


def _containers_of(refs: tuple[str, ...]) -> bytes:
    present = [r for r in refs if run(["podman", "image", "exists", r], env=podman_env(),
                                      timeout=120, check=False).returncode == 0]  # fmt: skip
    return b"".join(_podman("ps", "-a", "-q", "--filter", f"ancestor={r}") for r in present)


def remove_images(*refs: str) -> None:
    """Remove the images (IDs or names) once no container of theirs is left; absent ones
    are ignored."""
    for _ in range(ATTEMPTS):
        if not _containers_of(refs).strip():
            _podman("rmi", "--force", "--ignore", "--", *refs)
            return
        time.sleep(0.25)
    raise AssertionError(f"containers of {refs} still there after {ATTEMPTS / 4:.0f} s")
