"""A writer's clone made on its host: the base bundle, exported on the controller from
the operator's checkout, is streamed into a throwaway container on the writer's host
(clonetool `provision`), which clones it into the writer's storage there with
writerpool's own git settings and reports the clone's refs on stdout. The same path
serves the local host and a host over SSH, and a reset's bundle goes the same way
(`stream_base`): nothing of the controller is mounted into the container.

The answer is hostile input (it comes from a container): bounded, parsed into a model,
and accepted only when it names exactly the baseline the controller expects of the
bundle it sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError, failure
from writerpool.gitops.base import BaseRef, copyable_origin, origin_url
from writerpool.gitops.bundle import base_bundle_format, create_base_bundle, merged_tags
from writerpool.pool.writer.inspect import tool_spec
from writerpool.proc import CommandFailed, Completed, last_line
from writerpool.report import Report, sanitize
from writerpool.runtime.host import WriterHost
from writerpool.runtime.spec import ContainerSpec
from writerpool.state.writer import Baseline, WriterState

PROVISION_TIMEOUT = 3600.0
# The variable that carries the request to clonetool `provision` and `reset` (the
# payload's REQUEST_VAR; tests/unit/test_payload_agreement.py checks they agree).
REQUEST_VAR = "WRITERPOOL_REQUEST"
# The answer lists the clone's refs: the base branch and its merged tags.
MAX_ANSWER = 8 * 1024 * 1024
OID = r"^([0-9a-f]{40}|[0-9a-f]{64})$"
BUNDLE = "provision.bundle"


class ProvisionAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    head: str = Field(max_length=4096)
    commit: str = Field(pattern=OID)
    refs: dict[str, str]
    size: int = Field(ge=0)


def expected_baseline(repo: Path, base: BaseRef, tags: bool) -> Baseline:
    """The baseline a clone of `base`'s bundle has, read from the operator's checkout."""
    return Baseline(
        head=f"refs/heads/{base.branch}",
        commit=base.commit,
        branches={base.branch: base.commit},
        tags=merged_tags(repo, base.commit) if tags else {},
    )


def _baseline(answer: ProvisionAnswer) -> Baseline:
    heads = {r.removeprefix("refs/heads/"): o for r, o in answer.refs.items()
             if r.startswith("refs/heads/")}  # fmt: skip
    tags = {r: o for r, o in answer.refs.items() if r.startswith("refs/tags/")}
    return Baseline(head=answer.head, commit=answer.commit, branches=heads, tags=tags)


def _read_answer(out: IO[bytes], answer: bytearray, code: str = "writer_clone_failed") -> None:
    """The container's stdout, refused past MAX_ANSWER as it comes (the container is
    then removed)."""
    for chunk in iter(lambda: out.read(65536), b""):  # bounded by MAX_ANSWER
        answer.extend(chunk)
        if len(answer) > MAX_ANSWER:
            raise WriterpoolError(code, "the throwaway container's answer is too large")


def _parse(stdout: bytes, stderr: bytes, returncode: int) -> ProvisionAnswer:
    if len(stdout) > MAX_ANSWER:
        raise WriterpoolError("writer_clone_failed", "the provisioning answer is too large")
    try:
        raw = json.loads(stdout)
    except ValueError:
        raw = None
    if not isinstance(raw, dict) or returncode != 0 or "error" in raw:
        cause = str(raw.get("error")) if isinstance(raw, dict) else ""
        said = cause or last_line(stderr, "no output")
        raise WriterpoolError(
            "writer_clone_failed", sanitize(f"cloning on the writer's host: {said[:300]}")
        )
    try:
        return ProvisionAnswer.model_validate(raw)
    except ValidationError as exc:
        raise WriterpoolError("writer_clone_failed", "the provisioning answer is invalid") from exc


def _request(repo: Path, base: BaseRef, report: Report, target: str) -> dict[str, Any]:
    origin = origin_url(repo)
    if origin is not None and not copyable_origin(origin):
        report.add("remote_url_refused", "warning", target,
                   "the origin URL carries credentials or an unsafe form; not copied")  # fmt: skip
        origin = None
    # In the container's environment: nothing secret (an origin with credentials is
    # never copied), and stdin stays the bundle alone.
    return {"branch": base.branch, "commit": base.commit, "origin": origin}


def stream_base(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    spec: ContainerSpec,
    command: str,
    request: dict[str, Any],
    repo: Path,
    base: BaseRef,
    code: str,
) -> tuple[bytes, Completed]:
    """Run clonetool `command` in `spec` on the writer's host with a bundle of `base` on
    its stdin (exported on the controller beside the writer's state, streamed from the
    file) and `request` in its environment: its answer (bounded) and how it ended. The
    same for provisioning and reset, on every host. The caller holds the lease."""
    bundle = paths.writer_dir(state.name) / BUNDLE
    bundle.unlink(missing_ok=True)  # left by a run killed midway
    try:
        create_base_bundle(repo, base, state.tags == "reachable", bundle)
        sized = {**request, "object_format": base_bundle_format(bundle),
                 "max_bytes": bundle.stat().st_size}  # fmt: skip
        spec = spec.model_copy(update={"env": {**spec.env, REQUEST_VAR: json.dumps(sized)}})
        answer = bytearray()
        with bundle.open("rb") as stream:
            done = host.stream(spec, ["python3", "-m", "clonetool", command],
                               timeout=PROVISION_TIMEOUT, input=stream,
                               consume=lambda out: _read_answer(out, answer, code))  # fmt: skip
    except CommandFailed as exc:
        raise failure(code, "the throwaway container did not finish", exc) from exc
    finally:
        bundle.unlink(missing_ok=True)
    return bytes(answer), done


def clone_on_host(
    paths: Paths,
    host: WriterHost,
    state: WriterState,
    pool: Pool,
    repo: Path,
    base: BaseRef,
    report: Report,
    clear: tuple[str, ...] = (),
) -> Baseline:
    """(Re)build the writer's clone in its storage on `host` from a bundle of `base`;
    return its baseline, verified against the base. The same container empties the
    storage parts `clear` names there (a recreate's agent directory and cache). The
    caller holds the lease."""
    target = f"writer/{state.alias}/{state.name}"
    spec = tool_spec(paths, host, state, pool, "provision", clone_rw=True, storage=clear)
    request = _request(repo, base, report, target)
    stdout, done = stream_base(paths, host, state, spec, "provision", request, repo, base,
                               "writer_clone_failed")  # fmt: skip
    baseline = _baseline(_parse(stdout, done.stderr, done.returncode))
    if baseline != expected_baseline(repo, base, state.tags == "reachable"):
        raise WriterpoolError(
            "clone_verification_failed", "the clone on the writer's host is not at the base"
        )
    return baseline
