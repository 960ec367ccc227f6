"""Looking at a writer's clone from a throwaway container; the clone is never changed.

The host never runs git inside a clone an agent has touched: the clone's config,
hooks and attributes could make git run programs. The `clonetool` package runs in
the writer's image instead, with no network, the clone mounted read-only at /work and
only an output directory writable, and reports in JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError, failure
from writerpool.pool.container import limits_supported, writer_layout
from writerpool.proc import CommandFailed
from writerpool.report import sanitize
from writerpool.runtime.image import resolve_image
from writerpool.runtime.podman import Podman
from writerpool.runtime.spec import (
    LABEL_ROLE,
    LABEL_WORKSPACE,
    LABEL_WRITER,
    ContainerSpec,
    Limits,
    Mount,
)
from writerpool.state.writer import Baseline, WriterState

TOOL = Path(__file__).with_name("clonetool")
TOOL_PARENT_IN_CONTAINER = "/pi"
TOOL_TIMEOUT = 1800.0
OID = r"^([0-9a-f]{40}|[0-9a-f]{64})$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class ToolReport(_Model):
    head: str
    head_commit: str | None = Field(default=None, pattern=OID)
    branches: tuple[BranchSeen, ...]
    stash: bool
    tags: int
    dirty: bool
    wip_tree: str | None = Field(default=None, pattern=OID)
    exports: tuple[Export, ...] = ()
    bundle: Literal["collect.bundle"] | None = None
    excluded: tuple[str, ...] = ()
    unreadable: bool = False


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
    unreadable: bool = False  # git skipped a directory it could not read

    @classmethod
    def from_report(cls, report: ToolReport) -> Inspection:
        return cls(
            head=report.head, head_commit=report.head_commit,
            branches={b.name: b.commit for b in report.branches if b.commit is not None},
            stash=report.stash, dirty=report.dirty, wip_tree=report.wip_tree,
            problems={b.name: b.problem or "unreadable" for b in report.branches
                      if b.commit is None},
            exports=report.exports, tags=report.tags, bundle=report.bundle,
            unreadable=report.unreadable,
        )  # fmt: skip


def at_baseline(inspection: Inspection, baseline: Baseline) -> bool:
    """True when the clone is exactly its recorded clean state (the session guard)."""
    return (
        inspection.head == baseline.head
        and inspection.head_commit == baseline.commit
        and inspection.branches == baseline.branches
        and not inspection.problems
        and not inspection.stash
        and not inspection.dirty
        and not inspection.unreadable
    )


def tool_spec(
    paths: Paths,
    state: WriterState,
    pool: Pool,
    role: str,
    *,
    clone_rw: bool = False,
    out_dir: Path | None = None,
    base_dir: Path | None = None,
) -> ContainerSpec:
    """A throwaway container of the writer's image that runs the clonetool package."""
    clone = writer_layout(paths, state.name)["clone"]
    mounts = [
        Mount(source=clone, target="/work", read_only=not clone_rw),
        Mount(source=TOOL, target=f"{TOOL_PARENT_IN_CONTAINER}/clonetool", read_only=True),
    ]
    if out_dir is not None:
        mounts.append(Mount(source=out_dir, target="/out"))
    if base_dir is not None:
        mounts.append(Mount(source=base_dir, target="/base", read_only=True))
    limits = (
        Limits(memory=pool.memory, cpus=pool.cpus, pids=pool.pids) if limits_supported() else None
    )
    return ContainerSpec(
        image_id=resolve_image(paths, state.image),
        name=f"writerpool-{state.name}-{role}",
        labels={LABEL_WRITER: state.name, LABEL_WORKSPACE: state.alias, LABEL_ROLE: role},
        mounts=tuple(mounts),
        env={
            "GIT_CONFIG_NOSYSTEM": "1",
            "PYTHONPATH": TOOL_PARENT_IN_CONTAINER,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        network="none",
        # Not /work: `python3 -m` puts its working directory first on sys.path, and the
        # clone could hold a module named like one the tool imports.
        workdir=TOOL_PARENT_IN_CONTAINER,
        limits=limits,
    )


def run_tool(
    podman: Podman, spec: ContainerSpec, command: str, request: dict[str, Any], code: str
) -> dict[str, Any]:
    """Run `python3 -m clonetool COMMAND` in `spec`; its JSON answer, or WriterpoolError(code)."""
    try:
        done = podman.run(
            spec,
            ["python3", "-m", "clonetool", command],
            timeout=TOOL_TIMEOUT,
            input=json.dumps(request).encode(),
        )
    except CommandFailed as exc:
        raise failure(code, "the throwaway container did not finish", exc) from exc
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise failure(
            code, sanitize(f"the throwaway container failed: {last[0][:200]}"), text=last[0]
        )
    if done.returncode != 0 or "error" in answer:
        error = str(answer.get("error"))
        raise failure(code, sanitize(f"in the clone: {error[:300]}"), text=error)
    return answer


def _request(state: WriterState, bundle: bool) -> dict[str, Any]:
    baseline = state.baseline.branches if state.baseline is not None else {}
    exclude = sorted({state.base.commit, *baseline.values()})
    return {"baseline": baseline, "exclude": exclude, "bundle": bundle}


def _parse(answer: dict[str, Any]) -> Inspection:
    try:
        return Inspection.from_report(ToolReport.model_validate(answer))
    except ValidationError as exc:
        raise WriterpoolError("writer_inspect_failed", "the inspection report is invalid") from exc


def inspect_writer(paths: Paths, podman: Podman, state: WriterState, pool: Pool) -> Inspection:
    """Inspect the writer's clone without changing it (the caller holds the lease)."""
    spec = tool_spec(paths, state, pool, "inspect")
    return _parse(
        run_tool(podman, spec, "inspect", _request(state, False), "writer_inspect_failed")
    )


def scan_for_collect(
    paths: Paths, podman: Podman, state: WriterState, pool: Pool, out_dir: Path
) -> Inspection:
    """Inspect and write the bundle of new work to `out_dir` (clone still read-only)."""
    spec = tool_spec(paths, state, pool, "inspect", out_dir=out_dir)
    # A failure here may be the bundle as well as the inspection: report it as collection's.
    return _parse(run_tool(podman, spec, "inspect", _request(state, True), "writer_collect_failed"))
