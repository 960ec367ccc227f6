"""A writer's clone made from a base bundle without `git clone`'s connectivity walk is
still complete and clean, in either object format; a bundle with prerequisites is not a
base and is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import require_tool
from tests.support.repos import git_out, make_repo, run_git
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.gitops.bundle import clone_from_bundle, create_base_bundle

pytestmark = pytest.mark.git


@pytest.fixture(autouse=True)
def _git() -> None:
    require_tool("git")


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_the_clone_holds_every_object_and_checks_out_clean(
    tmp_path: Path, object_format: str
) -> None:
    repo = tmp_path / "operator"
    repo.mkdir()
    run_git(repo, "init", "-q", f"--object-format={object_format}", "--initial-branch=main")
    make_repo(repo, 300)
    run_git(repo, "tag", "-a", "-m", "release", "v1", "main~5")
    base = resolve_base(repo, "main")
    bundle = create_base_bundle(repo, base, True, tmp_path / "base.bundle")
    clone = clone_from_bundle(bundle, tmp_path / "clone", "main", None).path
    assert git_out(clone, "rev-parse", "--show-object-format") == object_format
    run_git(clone, "fsck", "--full", "--strict", "--no-dangling")
    assert git_out(clone, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git_out(clone, "rev-parse", "HEAD") == base.commit
    assert git_out(clone, "rev-list", "--count", "HEAD") == "300"
    assert git_out(clone, "rev-parse", "v1^{commit}") == git_out(repo, "rev-parse", "main~5")
    assert git_out(clone, "status", "--porcelain", "--untracked-files=all") == ""
    assert git_out(clone, "remote") == ""


def test_a_bundle_with_prerequisites_is_not_a_base(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "operator", 5)
    thin = tmp_path / "thin.bundle"
    run_git(repo, "bundle", "create", "-q", str(thin), "main", "^main~2")
    with pytest.raises(WriterpoolError) as info:
        clone_from_bundle(thin, tmp_path / "clone", "main", None)
    assert info.value.code == "writer_clone_failed"
    assert not (tmp_path / "clone").exists()
