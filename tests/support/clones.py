"""A clone shaped like a writer's (no hooks, no reflogs, packed refs, the base branch
checked out), made from a base bundle with git on this machine: for tests of the clone
check and of the bundle export, which need such a clone without a writer. writerpool
itself makes a writer's clone in a container on the writer's host
(pool/provision/stream.py, clonetool `provision`)."""

from __future__ import annotations

from pathlib import Path

from tests.support.repos import run_git
from writerpool.gitops.git_snapshot import GitDirSnapshot
from writerpool.gitops.verify import probe, verify_snapshot
from writerpool.payload.clonetool.gitsnap import snapshot


def clone_problems(clone: Path) -> list[str]:
    """The clone check as the product makes it: clonetool's gitsnap answers the check's
    probe about `clone`'s `.git` (in the inspection's container it reads /work/.git;
    the same function here), and gitops/verify.py judges the answers."""
    seen = GitDirSnapshot.model_validate(snapshot(probe(), str(clone / ".git")))
    return verify_snapshot(seen)


def clone_bundle(bundle: Path, dest: Path, branch: str, origin: str | None = None) -> Path:
    header = bundle.read_bytes()[:4096]
    fmt = "sha256" if b"@object-format=sha256" in header else "sha1"
    dest.parent.mkdir(parents=True, exist_ok=True)
    run_git(dest.parent, "init", "-q", "--template=", f"--object-format={fmt}",
            f"--initial-branch={branch}", "--", str(dest))  # fmt: skip
    listed = run_git(dest, "bundle", "unbundle", str(bundle.resolve())).out
    refs = [line.split(" ", 1) for line in listed.splitlines() if " refs/" in line]
    updates = "".join(f"create {ref} {oid}\n" for oid, ref in refs)
    run_git(dest, "update-ref", "--stdin", input=updates.encode())
    run_git(dest, "pack-refs", "--all")
    run_git(dest, "checkout", "-q", "-f")
    if origin is not None:
        run_git(dest, "remote", "add", "--", "origin", origin)
    return dest
