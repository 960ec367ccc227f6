"""Base bundles (read back through a clone made from them) and collected bundles
imported back. The origin a writer's clone gets is tested where the clone is made
(test_provision_stream.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import require_tool
from tests.support.clones import clone_bundle, clone_problems
from tests.support.repos import commit_file, git_out, make_repo, run_git
from writerpool.errors import WriterpoolError
from writerpool.gitops.base import resolve_base
from writerpool.gitops.bundle import create_base_bundle, import_bundle, verify_bundle

pytestmark = pytest.mark.git


@pytest.fixture
def operator(tmp_path: Path) -> Path:
    require_tool("git")
    repo = make_repo(tmp_path / "operator", commits=40, files=5)
    run_git(repo, "tag", "-a", "-m", "release 1", "v1", "main~10")
    run_git(repo, "tag", "light", "main~3")
    run_git(repo, "checkout", "-q", "-b", "side", "main~20")
    commit_file(repo, "side.txt", "side\n", "side work")
    run_git(repo, "tag", "side-tag", "side")
    run_git(repo, "checkout", "-q", "main")
    return repo


def _refs(repo: Path) -> str:
    return git_out(repo, "for-each-ref", "--format=%(objectname) %(refname)")


def _tags(clone: Path) -> list[str]:
    return git_out(clone, "for-each-ref", "--format=%(refname:short)", "refs/tags/").split()


def _inodes(root: Path) -> set[tuple[int, int]]:
    found = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(Path(dirpath) / name)
            found.add((st.st_dev, st.st_ino))
    return found


def _clone(
    operator: Path,
    tmp_path: Path,
    name: str = "main",
    *,
    tags: bool = False,
    origin: str | None = None,
) -> Path:
    base = resolve_base(operator, name)
    bundle = create_base_bundle(operator, base, tags, tmp_path / "w" / "base.bundle")
    return clone_bundle(bundle, tmp_path / "w" / "clone", base.branch, origin)


def test_clone_holds_the_full_history_of_the_base(operator: Path, tmp_path: Path) -> None:
    clone = _clone(operator, tmp_path)
    assert git_out(clone, "rev-list", "--count", "main") == git_out(
        operator, "rev-list", "--count", "main"
    )
    assert git_out(clone, "rev-parse", "HEAD") == git_out(operator, "rev-parse", "main")
    assert git_out(clone, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git_out(clone, "status", "--porcelain") == ""
    assert clone_problems(clone) == []


def test_ten_thousand_commits_clone_completely(tmp_path: Path) -> None:
    require_tool("git")
    repo = make_repo(tmp_path / "big", commits=10_000, files=50)
    clone = _clone(repo, tmp_path)
    assert git_out(clone, "rev-list", "--count", "HEAD") == "10000"
    assert git_out(clone, "fsck", "--no-progress", "--connectivity-only") == ""


def test_remote_base_becomes_a_branch_named_without_the_remote(
    operator: Path, tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    run_git(tmp_path, "clone", "-q", "--", str(operator), str(checkout))
    clone = _clone(checkout, tmp_path, "origin/side")
    assert git_out(clone, "symbolic-ref", "HEAD") == "refs/heads/side"
    assert git_out(clone, "rev-parse", "HEAD") == git_out(operator, "rev-parse", "side")
    assert git_out(clone, "for-each-ref", "--format=%(refname)") == "refs/heads/side"


def test_no_object_file_is_shared_with_the_operator(operator: Path, tmp_path: Path) -> None:
    run_git(operator, "gc", "-q")  # packs and loose objects both exist to be linked
    commit_file(operator, "loose.txt", "loose\n", "a loose object")
    clone = _clone(operator, tmp_path)
    theirs = _inodes(operator / ".git" / "objects")
    ours = _inodes(clone / ".git" / "objects")
    assert theirs and ours
    assert not theirs & ours


def test_tags_merged_into_the_base_travel_only_when_asked(operator: Path, tmp_path: Path) -> None:
    with_tags = _clone(operator, tmp_path / "a", tags=True)
    assert _tags(with_tags) == ["light", "v1"]  # not side-tag
    assert git_out(with_tags, "cat-file", "-t", "v1") == "tag"
    without = _clone(operator, tmp_path / "b", tags=False)
    assert _tags(without) == []


def test_exporting_changes_nothing_in_the_operator_checkout(operator: Path, tmp_path: Path) -> None:
    before = (_refs(operator), sorted(os.listdir(operator / ".git")))
    _clone(operator, tmp_path, tags=True)
    assert (_refs(operator), sorted(os.listdir(operator / ".git"))) == before
    assert sorted(os.listdir(tmp_path / "w")) == ["base.bundle", "clone"]  # no scratch left


def _writer_bundle(clone: Path, tmp_path: Path, *refs: str) -> Path:
    bundle = tmp_path / "collected.bundle"
    run_git(clone, "bundle", "create", "-q", str(bundle), *refs, "^main")
    return bundle


@pytest.fixture
def worked_clone(operator: Path, tmp_path: Path) -> Path:
    clone = _clone(operator, tmp_path)
    run_git(clone, "checkout", "-q", "-b", "feature/x")
    commit_file(clone, "new.txt", "new\n", "writer work")
    run_git(clone, "tag", "writer-tag")
    return clone


def test_collected_bundle_verifies_and_lists_its_refs(
    operator: Path, worked_clone: Path, tmp_path: Path
) -> None:
    bundle = _writer_bundle(worked_clone, tmp_path, "feature/x", "writer-tag")
    refs = verify_bundle(operator, bundle)
    head = git_out(worked_clone, "rev-parse", "feature/x")
    assert [(r.ref, r.commit) for r in refs] == [
        ("refs/heads/feature/x", head),
        ("refs/tags/writer-tag", head),
    ]


def test_bundle_whose_prerequisites_are_missing_does_not_verify(
    worked_clone: Path, tmp_path: Path
) -> None:
    bundle = _writer_bundle(worked_clone, tmp_path, "feature/x")
    stranger = make_repo(tmp_path / "stranger", commits=2, files=1)
    with pytest.raises(WriterpoolError) as err:
        verify_bundle(stranger, bundle)
    assert err.value.code == "writer_collect_failed"


def test_import_lands_under_the_writer_namespace_only(
    operator: Path, worked_clone: Path, tmp_path: Path
) -> None:
    bundle = _writer_bundle(worked_clone, tmp_path, "feature/x", "writer-tag")
    before = _refs(operator)
    import_bundle(
        operator, bundle, [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/feature/x")]
    )
    added = set(_refs(operator).splitlines()) - set(before.splitlines())
    head = git_out(worked_clone, "rev-parse", "feature/x")
    assert added == {f"{head} refs/remotes/writer-demo-w1/feature/x"}
    assert not (operator / ".git" / "FETCH_HEAD").exists()
    assert "writer-tag" not in _refs(operator)


def test_import_force_updates_a_rewritten_branch(
    operator: Path, worked_clone: Path, tmp_path: Path
) -> None:
    mapping = [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/feature/x")]
    import_bundle(operator, _writer_bundle(worked_clone, tmp_path, "feature/x"), mapping)
    run_git(worked_clone, "commit", "-q", "--amend", "-m", "rewritten")
    (tmp_path / "collected.bundle").unlink()
    import_bundle(operator, _writer_bundle(worked_clone, tmp_path, "feature/x"), mapping)
    assert git_out(operator, "rev-parse", "refs/remotes/writer-demo-w1/feature/x") == git_out(
        worked_clone, "rev-parse", "feature/x"
    )


@pytest.mark.parametrize(
    "mapping",
    [
        [("refs/heads/feature/x", "refs/heads/main")],
        [("refs/heads/feature/x", "refs/remotes/origin/feature/x")],
        [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/../../heads/main")],
        [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/-x")],
        [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/x.lock")],
        [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/")],
        [("refs/heads/feature/x", "refs/remotes/writer-/x")],
        [("refs/heads/feature/x", "refs/remotes/writer-demo-w1/a\nb")],
        [("--upload-pack=touch x", "refs/remotes/writer-demo-w1/x")],
        [
            ("refs/heads/feature/x", "refs/remotes/writer-demo-w1/a"),
            ("refs/heads/feature/x", "refs/remotes/writer-demo-w1/ok"),
            ("refs/heads/feature/x", "refs/heads/evil"),
        ],
        [
            ("refs/heads/feature/x", "refs/remotes/writer-demo-w1/same"),
            ("refs/tags/writer-tag", "refs/remotes/writer-demo-w1/same"),
        ],
    ],
)
def test_unsafe_destinations_refuse_the_whole_import(
    operator: Path, worked_clone: Path, tmp_path: Path, mapping: list[tuple[str, str]]
) -> None:
    bundle = _writer_bundle(worked_clone, tmp_path, "feature/x", "writer-tag")
    before = _refs(operator)
    with pytest.raises(WriterpoolError) as err:
        import_bundle(operator, bundle, mapping)
    assert err.value.code == "ref_name_refused"
    assert _refs(operator) == before


def test_hostile_ref_names_in_a_bundle_are_listed_but_not_importable(
    operator: Path, worked_clone: Path, tmp_path: Path
) -> None:
    head = git_out(worked_clone, "rev-parse", "feature/x")
    run_git(worked_clone, "update-ref", "refs/heads/-evil", head)
    bundle = _writer_bundle(worked_clone, tmp_path, "refs/heads/-evil")
    refs = verify_bundle(operator, bundle)
    assert [r.ref for r in refs] == ["refs/heads/-evil"]
    with pytest.raises(WriterpoolError) as err:
        import_bundle(operator, bundle, [("refs/heads/-evil", "refs/remotes/writer-w/-evil")])
    assert err.value.code == "ref_name_refused"


def test_import_runs_no_hook_of_the_operator_checkout(
    operator: Path, worked_clone: Path, tmp_path: Path
) -> None:
    canary = tmp_path / "CANARY"
    hook = operator / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch {canary}\n")
    hook.chmod(0o755)
    bundle = _writer_bundle(worked_clone, tmp_path, "feature/x")
    import_bundle(operator, bundle, [("refs/heads/feature/x", "refs/remotes/writer-w/feature/x")])
    assert not canary.exists()
    run_git(operator, "update-ref", "refs/heads/control", "main")  # control: hooks are live
    assert canary.exists()


def test_import_of_a_corrupt_bundle_fails_cleanly(operator: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "corrupt.bundle"
    bundle.write_bytes(b"# v2 git bundle\n" + b"0" * 40 + b" refs/heads/x\n\nPACKgarbage")
    before = _refs(operator)
    with pytest.raises(WriterpoolError) as err:
        import_bundle(operator, bundle, [("refs/heads/x", "refs/remotes/writer-w/x")])
    assert err.value.code == "writer_collect_failed"
    assert _refs(operator) == before
