"""A clone's refs as the inspection reads them: from the files themselves, in a throwaway
container of the writer's image on the writer's host (pool/writer/inspect.py, clonetool), as
git would list them, with names git would refuse seen too, links and special files
never followed, and a clone past the read limits refused before the rest is read."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pytest

from tests.support.clones import clone_bundle
from tests.support.repos import commit_file, git_out, make_repo, run_git
from writerpool.config.models import Pool
from writerpool.config.paths import Paths
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.gitops.bundle import create_base_bundle
from writerpool.gitops.limits import LIMITS
from writerpool.pool.provision.make import base_record
from writerpool.pool.writer.inspect import Inspection, inspect_writer
from writerpool.runtime.local import LocalPodman
from writerpool.state.writer import WriterState

pytestmark = [pytest.mark.podman, pytest.mark.image, pytest.mark.git]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pristine")
    repo = make_repo(root / "operator", commits=6, files=2)
    run_git(repo, "tag", "-a", "-m", "annotated", "v1", "main~1")
    bundle = create_base_bundle(repo, resolve_base(repo, "main"), True, root / "base.bundle")
    return repo, clone_bundle(bundle, root / "clone", "main")


@pytest.fixture
def writer(pristine: tuple[Path, Path], image_pin: Path) -> WriterState:
    """A writer of this machine whose clone is a copy of the pristine one."""
    repo, clone = pristine
    name = f"refs{secrets.token_hex(3)}-w1"
    shutil.copytree(clone, Paths.from_env().writer_dir(name) / "clone", symlinks=True)
    fields = {
        "name": name, "alias": name[:-3], "settings_digest": "sha256:" + "0" * 64,
        "image": "default", "network": "none", "cache": "none", "lifecycle": "persistent",
        "tags": "reachable", "profiles": ["code"], "host": "local",
        "base": base_record(resolve_base(repo, "main")),
    }  # fmt: skip
    return WriterState.model_validate(fields)


def _clone(writer: WriterState) -> Path:
    return Paths.from_env().writer_dir(writer.name) / "clone"


def _seen(writer: WriterState) -> Inspection:
    return inspect_writer(Paths.from_env(), LocalPodman(), writer, Pool())


def _git_view(clone: Path, prefix: str) -> dict[str, str]:
    out = git_out(clone, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    return {ref.removeprefix(prefix): oid
            for oid, ref in (line.split(" ", 1) for line in out.splitlines())}  # fmt: skip


def test_a_fresh_clone_reads_as_its_baseline(writer: WriterState) -> None:
    clone, seen = _clone(writer), _seen(writer)
    assert (seen.head, seen.head_commit) == ("refs/heads/main", git_out(clone, "rev-parse", "HEAD"))
    assert seen.branches == _git_view(clone, "refs/heads/")
    assert seen.tag_refs == {"refs/tags/" + k: v for k, v in _git_view(clone, "refs/tags/").items()}
    assert (seen.stash, seen.problems, seen.dirty) == (False, {}, False)


def test_agent_work_shows_as_branches_stash_and_head(writer: WriterState) -> None:
    clone = _clone(writer)
    run_git(clone, "checkout", "-q", "-b", "feature/deep/name")
    commit_file(clone, "x.txt", "x\n", "work")
    (clone / "x.txt").write_text("changed\n")
    run_git(clone, "stash", "-q")
    run_git(clone, "pack-refs", "--all")  # some refs packed ...
    run_git(clone, "branch", "loose-one")  # ... and one loose
    seen = _seen(writer)
    assert (seen.head, seen.head_commit) == ("refs/heads/feature/deep/name",
                                             git_out(clone, "rev-parse", "HEAD"))  # fmt: skip
    assert seen.branches == _git_view(clone, "refs/heads/")
    assert set(seen.branches) == {"main", "feature/deep/name", "loose-one"}
    assert seen.stash is True


def test_a_detached_head_and_a_branch_git_would_refuse_are_seen(writer: WriterState) -> None:
    clone = _clone(writer)
    run_git(clone, "checkout", "-q", "--detach", "HEAD~2")
    head = git_out(clone, "rev-parse", "HEAD")
    (clone / ".git" / "refs" / "heads" / "-evil").write_text(head + "\n")
    seen = _seen(writer)
    assert (seen.head, seen.head_commit) == ("detached", head)
    assert seen.branches["-evil"] == head


def test_a_linked_or_special_ref_is_named_never_followed(
    writer: WriterState, tmp_path: Path
) -> None:
    heads = _clone(writer) / ".git" / "refs" / "heads"
    secret = tmp_path / "secret"
    secret.write_text("0" * 40 + "\n")
    (heads / "leak").symlink_to(secret)
    os.mkfifo(heads / "pipe")  # opening it would block the reader
    seen = _seen(writer)
    assert seen.problems == {"leak": "not a plain file", "pipe": "not a plain file"}
    assert "leak" not in seen.branches and "pipe" not in seen.branches


def test_refs_past_the_count_cap_are_refused_before_the_rest_is_read(
    writer: WriterState,
) -> None:
    clone = _clone(writer)
    commit = git_out(clone, "rev-parse", "HEAD")
    with (clone / ".git" / "packed-refs").open("a") as handle:
        handle.writelines(f"{commit} refs/heads/b{i:08d}\n" for i in range(LIMITS.refs + 1))
    with pytest.raises(WriterpoolError) as caught:
        _seen(writer)
    assert caught.value.code == "writer_inspect_failed"
    assert "over cap" in caught.value.message and str(LIMITS.refs) in caught.value.message
