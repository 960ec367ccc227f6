"""Looking at a writer's clone from a throwaway container; the clone is never changed.

The host never runs git inside a clone an agent has touched: the clone's config,
hooks and attributes could make git run programs. The `clonetool` package runs in
the writer's image instead, with no network, the clone mounted read-only at /work and
only an output directory writable, and reports in JSON.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError, failure
from writerpool.gitops.git_snapshot import GitDirSnapshot
from writerpool.gitops.limits import LIMITS
from writerpool.gitops.verify import probe, verify_snapshot
from writerpool.pool.writer.container import pool_limits, writer_image, writer_of
from writerpool.proc import CommandFailed, last_line
from writerpool.report import sanitize
from writerpool.runtime.host import WriterHost
from writerpool.runtime.image_tools import CLONETOOL_PARENT
from writerpool.runtime.spec import (
    LABEL_CONTROLLER,
    LABEL_ROLE,
    LABEL_VIEW,
    LABEL_WORKSPACE,
    LABEL_WRITER,
    ContainerSpec,
    Mount,
    VolumeMount,
    by_kind,
)
from writerpool.state.writer import Baseline, WriterState

TOOL_TIMEOUT = 1800.0
# Where a tool is given the writer's other storage, /storage/PART (the payload's
# clonetool/storage.py ROOT; tests/unit/test_payload_agreement.py checks they agree).
STORAGE_ROOT = "/storage"
OID = r"^([0-9a-f]{40}|[0-9a-f]{64})$"
# The role of an operator view's throwaway container (writer status, diff, log).
VIEW = "view"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _at_most(limit: int) -> AfterValidator:
    def check(value: str) -> str:
        if len(value) > limit:
            raise ValueError(f"longer than {limit} characters")
        return value

    return AfterValidator(check)


# A name or path from the clone, kept as its bytes (an undecodable byte as a surrogate,
# clonetool reads them so): pydantic's own max_length refuses a string it cannot encode
# as UTF-8, and one such name from an agent would fail the whole inspection. Made valid
# text only where it reaches a client (sessions/work.py, utf8.py).
CloneName = Annotated[str, _at_most(8192)]
ClonePath = Annotated[str, _at_most(4096)]


class BranchSeen(_Model):
    name: str
    commit: str | None = Field(default=None, pattern=OID)
    problem: str | None = None


class Export(_Model):
    """A ref collection would export: a changed branch, a detached HEAD, or the WIP."""

    name: str
    kind: Literal["branch", "detached", "wip"]
    commit: str | None = Field(default=None, pattern=OID)
    ref: str | None = Field(default=None, pattern=r"^refs/heads/wp-[0-9]+$")
    in_bundle: bool = False


EntryKind = Literal[
    "nested_repo", "dot_git", "unreadable", "too_large", "over_total", "refused_name",
    "ignored", "special", "directory",
]  # fmt: skip
# Work that collection cannot export: a collection that meets one is incomplete.
WORK_KINDS = frozenset(
    {"nested_repo", "dot_git", "unreadable", "too_large", "over_total", "refused_name"}
)


class Entry(_Model):
    """Something in the work tree that git's view of the clone leaves out."""

    kind: EntryKind
    path: CloneName
    size: int = Field(default=0, ge=0)


class ExtraRef(_Model):
    """A ref outside refs/heads/ and refs/tags/ (the stash aside); never exported."""

    name: CloneName
    new: bool  # it reaches history no branch and no baseline commit reaches


class ToolReport(_Model):
    head: str
    head_commit: str | None = Field(default=None, pattern=OID)
    branches: tuple[BranchSeen, ...]
    stash: bool
    tags: int
    tag_refs: dict[str, str] = {}
    dirty: bool
    wip_tree: str | None = Field(default=None, pattern=OID)
    exports: tuple[Export, ...] = ()
    bundle: Literal["collect.bundle"] | None = None
    excluded: tuple[str, ...] = ()
    unreadable: bool = False
    entries: tuple[Entry, ...] = ()
    counts: dict[EntryKind, int] = {}
    unexported_digest: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")
    extra_refs: tuple[ExtraRef, ...] = ()
    git_state: tuple[str, ...] = ()
    index_matches: bool = True
    git_dir: GitDirSnapshot | None = None
    cache: Literal["empty", "held", "unreadable"] | None = None


@dataclass(frozen=True)
class Inspection:
    """What a writer's clone holds, as seen from inside a throwaway container."""

    head: str  # "refs/heads/<branch>" or "detached"
    head_commit: str | None
    branches: dict[str, str]  # readable branches: name -> commit
    stash: bool
    dirty: bool  # uncommitted or untracked changes (ignored files excluded)
    wip_tree: str | None = None
    problems: dict[str, str] = field(default_factory=dict)  # unreadable branches -> why
    exports: tuple[Export, ...] = ()
    tags: int = 0
    bundle: str | None = None  # file name in the output directory
    unreadable: bool = False  # something in the work tree could not be read
    tag_refs: dict[str, str] = field(default_factory=dict)
    entries: tuple[Entry, ...] = ()  # named (bounded per kind); counts has them all
    counts: dict[str, int] = field(default_factory=dict)
    unexported_digest: str = ""
    extra_refs: tuple[ExtraRef, ...] = ()
    git_state: tuple[str, ...] = ()  # git directory entries a fresh clone lacks
    index_matches: bool = True  # the clone's own index lists exactly HEAD's tree
    # Why the clone's git settings are unsafe (gitops/verify.py over what the container
    # saw of .git); None when the inspection did not look.
    clone_problems: tuple[str, ...] | None = None
    # Whether the writer's cache holds anything (empty, held, unreadable); None when the
    # inspection was not given the cache (its baseline does not have it empty).
    cache: str | None = None

    @property
    def unexported(self) -> tuple[Entry, ...]:
        """Work the collection cannot carry (named ones; see counts for all)."""
        return tuple(e for e in self.entries if e.kind in WORK_KINDS)

    @property
    def unexported_count(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind in WORK_KINDS)

    @property
    def leftovers(self) -> tuple[Entry, ...]:
        """What is not work but is not the baseline either: ignored, special, directories."""
        return tuple(e for e in self.entries if e.kind not in WORK_KINDS)

    @property
    def new_extra_refs(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.extra_refs if r.new)

    @classmethod
    def from_report(cls, report: ToolReport) -> Inspection:
        return cls(
            head=report.head, head_commit=report.head_commit,
            branches={b.name: b.commit for b in report.branches if b.commit is not None},
            stash=report.stash, dirty=report.dirty, wip_tree=report.wip_tree,
            problems={b.name: b.problem or "unreadable" for b in report.branches
                      if b.commit is None},
            exports=report.exports, tags=report.tags, bundle=report.bundle,
            unreadable=report.unreadable, tag_refs=dict(report.tag_refs),
            entries=report.entries, counts={str(k): n for k, n in report.counts.items()},
            unexported_digest=report.unexported_digest, extra_refs=report.extra_refs,
            git_state=report.git_state, index_matches=report.index_matches,
            clone_problems=None if report.git_dir is None
            else tuple(verify_snapshot(report.git_dir)),
            cache=report.cache,
        )  # fmt: skip


def _named(entries: tuple[Entry, ...], count: int) -> str:
    shown = ", ".join(ascii(e.path)[1:-1][:80] for e in entries[:3])
    return shown + (f" and {count - 3} more" if count > 3 else "")


def baseline_problems(inspection: Inspection, baseline: Baseline) -> list[str]:
    """Why the clone is not exactly its baseline, judged by content; empty when it is.

    The one definition the session guard, `writer list`, and reset's and recreate's
    verification use (the cache, outside the clone, is judged in pool/writer/baseline.py).
    """
    problems = []
    if (inspection.head, inspection.head_commit) != (baseline.head, baseline.commit):
        problems.append("HEAD is not the base commit")
    if inspection.branches != baseline.branches or inspection.problems:
        problems.append("the branches differ from the baseline's")
    if inspection.tag_refs != baseline.tags:
        problems.append("the tags differ from the baseline's")
    if inspection.stash:
        problems.append("a stash exists")
    if inspection.extra_refs:
        problems.append(
            f"{len(inspection.extra_refs)} ref(s) outside refs/heads (tags among them "
            "only when they reach new history)"
        )
    if inspection.dirty:
        problems.append("tracked files differ from the base or untracked files exist")
    for kind, label in KIND_LABELS.items():
        count = inspection.counts.get(kind, 0)
        if count:
            named = tuple(e for e in inspection.entries if e.kind == kind)
            problems.append(f"{count} {label}: {_named(named, count)}")
    if inspection.git_state:
        problems.append("git state a fresh clone lacks: " + ", ".join(inspection.git_state[:5]))
    if not inspection.index_matches:
        problems.append("the clone's index does not list exactly the base tree")
    return problems


KIND_LABELS = {
    "nested_repo": "nested repository or linked worktree",
    "dot_git": "directory named .git below the top",
    "unreadable": "unreadable path(s)",
    "too_large": "file(s) above the collection's size cap",
    "over_total": "file(s) beyond the collection's total cap",
    "refused_name": "file(s) git cannot hold",
    "ignored": "ignored file(s)",
    "special": "special file(s) (FIFO, socket, device)",
    "directory": "empty director(ies)",
}


def at_baseline(inspection: Inspection, baseline: Baseline) -> bool:
    """True when the clone is exactly its recorded clean state."""
    return not baseline_problems(inspection, baseline)


def cache_cleared(state: WriterState, pool: Pool) -> bool:
    """Whether the writer's cache is part of its baseline: empty after every reset,
    unless `[pool] keep_caches` keeps it across sessions."""
    return state.cache != "none" and not pool.keep_caches


def tool_spec(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    pool: Pool,
    role: str,
    *,
    clone_rw: bool = False,
    storage: tuple[str, ...] = (),
) -> ContainerSpec:
    """A throwaway container of the writer's image that runs the clonetool package the
    image carries (runtime/image_tools.py). `storage` names further parts of the
    writer's storage it is given at /storage/PART (clonetool/storage.py), read-only
    unless the clone is writable too: read there, or emptied there, on the writer's host.
    Role VIEW (an operator view without the lease): a unique name, and not the writer's
    label, so any number run beside each other and beside a session."""
    view = role == VIEW
    if view and clone_rw:
        raise ValueError("a view reads the clone and writes nothing")
    writer = writer_of(paths, state)
    mounts: list[Mount | VolumeMount] = [
        host.storage_mount(writer, part, target, read_only=not clone_rw)
        for part, target in (("clone", "/work"), *((p, f"{STORAGE_ROOT}/{p}") for p in storage))
    ]
    return ContainerSpec(
        image_id=writer_image(paths, host, state.image),
        name=f"writerpool-{state.name}-{role}" + (f"-{secrets.token_hex(6)}" if view else ""),
        labels={
            LABEL_VIEW if view else LABEL_WRITER: state.name,
            LABEL_CONTROLLER: writer.controller,
            LABEL_WORKSPACE: state.alias,
            LABEL_ROLE: role,
        },
        mounts=by_kind(mounts)[0],
        volumes=by_kind(mounts)[1],
        env={
            "GIT_CONFIG_NOSYSTEM": "1",
            "PYTHONPATH": CLONETOOL_PARENT,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        network="none",
        # Not /work: `python3 -m` puts its working directory first on sys.path, and the
        # clone could hold a module named like one the tool imports.
        workdir=CLONETOOL_PARENT,
        limits=pool_limits(pool, host.facts()),
    )


def run_tool(
    host: WriterHost, spec: ContainerSpec, command: str, request: dict[str, Any], code: str
) -> dict[str, Any]:
    """Run `python3 -m clonetool COMMAND` in `spec`; its JSON answer, or WriterpoolError(code)."""
    request = {**request, "limits": LIMITS.request()}  # one table for both readers
    try:
        done = host.run(
            spec,
            ["python3", "-m", "clonetool", command],
            timeout=TOOL_TIMEOUT,
            input=json.dumps(request).encode(),
        )
    except CommandFailed as exc:
        raise failure(code, "the throwaway container did not finish", exc) from exc
    return tool_answer(done.stdout, done.stderr, done.returncode, code)


def tool_answer(stdout: bytes, stderr: bytes, returncode: int, code: str) -> dict[str, Any]:
    """clonetool's JSON answer, or WriterpoolError(code) saying why there is none."""
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        last = last_line(stderr, "no output")
        raise failure(code, sanitize(f"the throwaway container failed: {last[:200]}"), text=last)
    if returncode != 0 or "error" in answer:
        error = str(answer.get("error"))
        raise failure(code, sanitize(f"in the clone: {error[:300]}"), text=error)
    return answer


def tool_request(state: WriterState, pool: Pool) -> dict[str, Any]:
    """The inspection's request: the baseline, what is not new, the collection's caps."""
    baseline = state.baseline.branches if state.baseline is not None else {}
    exclude = sorted({state.base.commit, *baseline.values()})
    caps = {"max_file": pool.collect_max_file_bytes, "max_total": pool.collect_max_total_bytes}
    return {"baseline": baseline, "exclude": exclude, "caps": caps, "git_dir": probe()}


def parse_report(answer: dict[str, Any]) -> Inspection:
    try:
        return Inspection.from_report(ToolReport.model_validate(answer))
    except ValidationError as exc:
        raise WriterpoolError("writer_inspect_failed", "the inspection report is invalid") from exc


def inspect_writer(
    paths: Paths, host: WriterHost, state: WriterState, pool: Pool, role: str = "inspect"
) -> Inspection:
    """Inspect the writer's clone without changing it: under the lease, or as a VIEW.
    The same container tells whether the cache is empty, when the baseline has it so."""
    storage = ("cache",) if cache_cleared(state, pool) else ()
    spec = tool_spec(paths, host, state, pool, role, storage=storage)
    return parse_report(
        run_tool(host, spec, "inspect", tool_request(state, pool), "writer_inspect_failed")
    )
