"""Bundles: the base exported from the operator's checkout (cloned on the writer's host:
pool/provision/stream.py), and collected work verified and imported back."""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from writerpool.errors import WriterpoolError, failure
from writerpool.gitops.base import BaseRef
from writerpool.gitops.hostgit import CommandFailed, git
from writerpool.gitops.refnames import git_format_reason, refuse_reason

_BUNDLE_LINE = re.compile(rb"([0-9a-f]{40}|[0-9a-f]{64})(?: (\S[^\n]*))?")
_IMPORT_DEST = re.compile(r"refs/remotes/(writer-[a-z][a-z0-9_-]{0,80})/(.+)", re.DOTALL)
BUNDLE_TIMEOUT = 3600.0


@dataclass(frozen=True)
class BundleRef:
    """One ref a bundle carries: full name (possibly hostile) and object id."""

    ref: str
    commit: str


def _object_dir(repo: Path) -> Path:
    done = git(repo, "rev-parse", "--path-format=absolute", "--git-path", "objects", timeout=60)
    return Path(done.out.strip())


def _object_format(repo: Path) -> str:
    done = git(repo, "rev-parse", "--show-object-format", timeout=60)
    fmt = done.out.strip()
    return fmt if fmt in {"sha1", "sha256"} else "sha1"


def merged_tags(repo: Path, commit: str) -> dict[str, str]:
    """Full tag ref -> object id of the tags a `tags` base bundle of `commit` carries."""
    return {ref: oid for oid, ref in _merged_tags(repo, commit)}


def _merged_tags(repo: Path, commit: str) -> list[tuple[str, str]]:
    """(object id, full tag ref) of the tags whose commit is in commit's history."""
    done = git(
        repo,
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        f"--merged={commit}",
        "refs/tags/",
        timeout=300,
    )
    tags: list[tuple[str, str]] = []
    for line in done.out.splitlines():
        oid, _, ref = line.partition(" ")
        if ref.startswith("refs/tags/") and "\n" not in ref:
            tags.append((oid, ref))
    return tags


def create_base_bundle(repo: Path, base: BaseRef, tags: bool, dest: Path) -> Path:
    """Write a bundle of the base's full history to `dest`, as `refs/heads/<branch>`.

    The bundle is made in a throwaway bare repository that borrows the operator's
    objects through `objects/info/alternates` and holds only the refs to export, so
    the operator's checkout gets no temporary refs. With `tags`, the tags merged
    into the base commit (as `git tag --merged` lists them) are included.
    """
    branch = base.branch
    if git_format_reason(branch) is not None or branch.startswith("-"):
        raise WriterpoolError("base_ref_invalid", "the base's branch name is not usable")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".base-export-", dir=dest.parent))
    try:
        try:
            objects = _object_dir(repo)
            fmt = _object_format(repo)
            exported = [(base.commit, f"refs/heads/{branch}")]
            if tags:
                exported += _merged_tags(repo, base.commit)
            scratch = work / "export.git"
            git(
                work,
                "init",
                "-q",
                "--bare",
                "--template=",
                f"--object-format={fmt}",
                f"--initial-branch={branch}",
                "--",
                str(scratch),
                timeout=60,
            )
            (scratch / "objects" / "info").mkdir(parents=True, exist_ok=True)
            (scratch / "objects" / "info" / "alternates").write_text(f"{objects}\n")
            updates = "".join(f"create {ref} {oid}\n" for oid, ref in exported)
            git(scratch, "update-ref", "--stdin", input=updates.encode(), timeout=300)
            git(
                scratch,
                "bundle",
                "create",
                "-q",
                str(dest.resolve()),
                "--branches",
                "--tags",
                timeout=BUNDLE_TIMEOUT,
            )
        except (CommandFailed, OSError) as exc:
            raise failure(
                "writer_base_unavailable", "exporting the base as a bundle failed", exc
            ) from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def _base_bundle_header(bundle: Path) -> tuple[str, bool]:
    """(object format, has prerequisites) from a bundle's header (v2 or v3)."""
    fmt, prerequisites = "sha1", False
    with bundle.open("rb") as handle:
        for number, line in enumerate(iter(handle.readline, b"")):
            if line == b"\n" or (number == 0 and not line.startswith(b"# v")):
                break  # the pack follows the header's blank line
            if line.strip() == b"@object-format=sha256":
                fmt = "sha256"
            prerequisites = prerequisites or line.startswith(b"-")
    return fmt, prerequisites


def base_bundle_format(bundle: Path) -> str:
    """A base bundle's object format; one with prerequisites is refused."""
    fmt, prerequisites = _base_bundle_header(bundle)
    if prerequisites:
        raise WriterpoolError("writer_clone_failed", "a base bundle has no prerequisites")
    return fmt


def verify_bundle(repo: Path, bundle: Path) -> list[BundleRef]:
    """Check a (possibly hostile) bundle against the operator's checkout; list its refs.

    `git bundle verify` confirms every prerequisite commit exists in `repo`.
    """
    path = str(bundle.resolve())
    try:
        git(repo, "bundle", "verify", "-q", path, timeout=BUNDLE_TIMEOUT)
        done = git(repo, "bundle", "list-heads", path, timeout=300)
    except CommandFailed as exc:
        raise WriterpoolError("writer_collect_failed", "the bundle does not verify") from exc
    refs: list[BundleRef] = []
    for line in done.stdout.split(b"\n"):
        if not line:
            continue
        match = _BUNDLE_LINE.fullmatch(line)
        if match is None or match.group(2) is None:
            raise WriterpoolError("writer_collect_failed", "the bundle's ref list is malformed")
        refs.append(
            BundleRef(
                ref=match.group(2).decode("utf-8", "surrogateescape"),
                commit=match.group(1).decode(),
            )
        )
    return refs


def _import_refusal(src: str, dst: str) -> str | None:
    """Why one (bundle ref -> destination ref) pair may not be fetched, or None."""
    if not src.startswith("refs/") or git_format_reason(src) is not None or not src.isprintable():
        return "a source ref is not a valid ref name"
    match = _IMPORT_DEST.fullmatch(dst)
    if match is None:
        return "a destination lies outside refs/remotes/writer-<name>/"
    reason = refuse_reason(match.group(2))
    return None if reason is None else f"a destination branch name is refused ({reason})"


def import_bundle(repo: Path, bundle: Path, mapping: list[tuple[str, str]]) -> None:
    """Fetch bundle refs into `refs/remotes/writer-<name>/...` of the operator's checkout.

    Every pair is checked before git runs; one bad pair refuses them all
    (`ref_name_refused`) and nothing changes. The update is atomic and forced (the
    namespace is writerpool's), fetches no tags, writes no FETCH_HEAD, and fsck-checks
    the incoming objects because the bundle came from an agent.
    """
    if not mapping:
        return
    destinations = [dst for _, dst in mapping]
    if len(set(destinations)) != len(destinations):
        raise WriterpoolError("ref_name_refused", "two refs would be imported to the same name")
    for src, dst in mapping:
        reason = _import_refusal(src, dst)
        if reason is not None:
            raise WriterpoolError("ref_name_refused", reason)
    refspecs = "".join(f"+{src}:{dst}\n" for src, dst in mapping)
    try:
        git(
            repo,
            "-c",
            "transfer.fsckObjects=true",
            "fetch",
            "-q",
            "--no-write-fetch-head",
            "--no-tags",
            "--atomic",
            "--no-auto-maintenance",
            "--no-recurse-submodules",
            "--no-prune",
            "--stdin",
            "--",
            str(bundle.resolve()),
            input=refspecs.encode("utf-8", "surrogateescape"),
            timeout=BUNDLE_TIMEOUT,
        )
    except CommandFailed as exc:
        raise failure("writer_collect_failed", "importing the bundle failed", exc) from exc
